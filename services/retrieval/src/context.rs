//! Context for injection: what the agent is told at session start and on each prompt.
//!
//! Session start: a resume block from the project's latest checkpoint (or host compaction
//! summary), recurring patterns, then recent memory of the project, within a token budget.
//! Prompt: only memories whose relevance to the prompt clears the threshold, from other
//! sessions; nothing at all when nothing does. Every line names an id the agent can `get`.

use crate::search::Searcher;
use proto::{ContextReply, ContextRequest, SearchRequest, context_request::Moment};

/// Context settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextConfig {
    /// Default budget of one injection, in tokens.
    pub budget_tokens: u32,
    /// The relevance a memory needs to be injected with a prompt.
    pub min_relevance: f64,
    /// Most memories injected with a prompt.
    pub prompt_hits: u32,
}

impl Default for ContextConfig {
    fn default() -> ContextConfig {
        ContextConfig {
            budget_tokens: 2_000,
            min_relevance: 0.5,
            prompt_hits: 5,
        }
    }
}

/// The hard ceiling when the host does not say (Claude Code's limit).
const HOST_MAX_CHARS: usize = 10_000;
/// Sessions whose work is listed at session start.
const RECENT_SESSIONS: i64 = 3;
/// Items listed per recent session.
const ITEMS_PER_SESSION: i64 = 6;
/// Patterns listed at session start.
const PATTERNS: i64 = 5;

/// Build the context for `request`; empty text when there is nothing worth saying.
pub async fn assemble(
    searcher: &Searcher,
    config: &ContextConfig,
    request: &ContextRequest,
) -> anyhow::Result<ContextReply> {
    let host_max = match request.max_chars {
        0 => HOST_MAX_CHARS,
        n => n as usize,
    };
    let budget_tokens = match request.budget_tokens {
        0 => config.budget_tokens,
        n => n,
    } as usize;
    let budget = Budget {
        chars: (budget_tokens * 4).min(host_max),
    };
    let reply = match request.moment() {
        Moment::SessionStart => session_start(searcher, request, budget).await?,
        Moment::Prompt => prompt(searcher, config, request, budget).await?,
        Moment::Unspecified => ContextReply::default(),
    };
    Ok(reply)
}

/// How much text a reply may hold.
#[derive(Debug, Clone, Copy)]
struct Budget {
    chars: usize,
}

/// Builds a reply line by line, refusing lines that would overflow the budget.
struct Writer {
    text: String,
    ids: Vec<i64>,
    budget: Budget,
}

impl Writer {
    fn new(budget: Budget) -> Writer {
        Writer {
            text: String::new(),
            ids: Vec::new(),
            budget,
        }
    }

    fn room(&self) -> usize {
        self.budget.chars.saturating_sub(self.text.chars().count())
    }

    /// Add a line if it fits; returns whether it did.
    fn line(&mut self, line: &str, id: Option<i64>) -> bool {
        if line.chars().count() + 1 > self.room() {
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        if let Some(id) = id {
            self.ids.push(id);
        }
        true
    }

    fn finish(self, header: &str) -> ContextReply {
        if self.ids.is_empty() {
            return ContextReply::default();
        }
        ContextReply {
            text: format!("{header}{}", self.text),
            item_ids: self.ids,
        }
    }
}

#[derive(sqlx::FromRow)]
struct Line {
    id: i64,
    kind: String,
    title: String,
    text: String,
    occurred_at: i64,
}

async fn session_start(
    searcher: &Searcher,
    request: &ContextRequest,
    budget: Budget,
) -> anyhow::Result<ContextReply> {
    const HEADER: &str = "# mneme: memory of this project\nEach [#id] can be opened with `mneme get ID` (MCP: get_observations).\n";
    let pool = &searcher.pool;
    let mut out = Writer::new(Budget {
        chars: budget.chars.saturating_sub(HEADER.len()),
    });

    // Resume from the latest session that has a checkpoint or a host compaction summary,
    // preferring its newest checkpoint: that holds the host's summary too, with decisions and
    // open tasks.
    let resume: Option<Line> = sqlx::query_as(
        "SELECT id, kind, title, text, occurred_at FROM memory_items
         WHERE session_id = (
             SELECT session_id FROM memory_items
             WHERE project = ? AND session_id <> ? AND kind IN ('checkpoint', 'compaction')
             ORDER BY occurred_at DESC, id DESC LIMIT 1)
           AND kind IN ('checkpoint', 'compaction')
         ORDER BY kind = 'checkpoint' DESC, occurred_at DESC, id DESC LIMIT 1",
    )
    .bind(&request.project)
    .bind(&request.session_id)
    .fetch_optional(pool)
    .await?;
    if let Some(resume) = resume {
        // The resume block may take up to half the budget; the rest is for what follows.
        let room = (out.room() / 2).saturating_sub(80);
        let body = crate::index::cut(resume.text.trim(), room);
        out.line(
            &format!(
                "\n## Resume ({}, [#{}])\n{body}",
                common::time::utc_day(resume.occurred_at),
                resume.id
            ),
            Some(resume.id),
        );
    }

    let patterns: Vec<Line> = sqlx::query_as(
        "SELECT id, kind, title, text, occurred_at FROM memory_items
         WHERE project = ? AND kind = 'pattern'
         ORDER BY occurred_at DESC, id DESC LIMIT ?",
    )
    .bind(&request.project)
    .bind(PATTERNS)
    .fetch_all(pool)
    .await?;
    if !patterns.is_empty() {
        out.line("\n## Recurring patterns", None);
        for p in patterns {
            if !out.line(
                &format!("- [#{}] {}", p.id, one_line(&p.title, 200)),
                Some(p.id),
            ) {
                break;
            }
        }
    }

    let sessions: Vec<(String, i64)> = sqlx::query_as(
        "SELECT session_id, MAX(occurred_at) AS last FROM memory_items
         WHERE project = ? AND session_id <> ?
         GROUP BY session_id ORDER BY last DESC LIMIT ?",
    )
    .bind(&request.project)
    .bind(&request.session_id)
    .bind(RECENT_SESSIONS)
    .fetch_all(pool)
    .await?;
    let mut heading = false;
    'sessions: for (session, last) in sessions {
        // What was asked, what went wrong and how sessions were summed up say most about
        // where work stands; tool calls are left to search.
        let lines: Vec<Line> = sqlx::query_as(
            "SELECT id, kind, title, text, occurred_at FROM (
                 SELECT id, kind, title, text, occurred_at FROM memory_items
                 WHERE session_id = ? AND kind IN ('summary', 'prompt', 'error', 'decision')
                 ORDER BY seq DESC LIMIT ?)
             ORDER BY occurred_at, id",
        )
        .bind(&session)
        .bind(ITEMS_PER_SESSION)
        .fetch_all(pool)
        .await?;
        if lines.is_empty() {
            continue;
        }
        if !heading {
            heading = out.line("\n## Recent work (oldest first within a session)", None);
        }
        let short = session.get(..8).unwrap_or(&session);
        if !out.line(
            &format!(
                "Session {short}, last active {}:",
                common::time::utc_day(last)
            ),
            None,
        ) {
            break;
        }
        for line in lines {
            let entry = format!(
                "- [#{}] {}: {}",
                line.id,
                line.kind,
                one_line(&line.title, 160)
            );
            if !out.line(&entry, Some(line.id)) {
                break 'sessions;
            }
        }
    }
    Ok(out.finish(HEADER))
}

async fn prompt(
    searcher: &Searcher,
    config: &ContextConfig,
    request: &ContextRequest,
    budget: Budget,
) -> anyhow::Result<ContextReply> {
    const HEADER: &str = "# mneme: related memory from earlier sessions\nEach [#id] can be opened with `mneme get ID` (MCP: get_observations).\n";
    if request.prompt.trim().is_empty() {
        return Ok(ContextReply::default());
    }
    let search = SearchRequest {
        query: request.prompt.clone(),
        project: request.project.clone(),
        limit: config.prompt_hits,
        exclude_sessions: if request.session_id.is_empty() {
            Vec::new()
        } else {
            vec![request.session_id.clone()]
        },
        min_relevance: config.min_relevance,
        ..SearchRequest::default()
    };
    let (hits, _) = searcher.search(&search).await?;
    let mut out = Writer::new(Budget {
        chars: budget.chars.saturating_sub(HEADER.len()),
    });
    for hit in hits {
        let line = format!(
            "- [#{}] {} {}: {} — {}",
            hit.id,
            common::time::utc_day(hit.occurred_at_ms),
            hit.kind,
            one_line(&hit.title, 120),
            one_line(&hit.snippet, 240)
        );
        if !out.line(&line, Some(hit.id)) {
            break;
        }
    }
    Ok(out.finish(HEADER))
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let mut cut = crate::index::cut(&flat, max.saturating_sub(1));
        cut.push('…');
        cut
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_refuses_lines_past_the_budget() {
        let mut w = Writer::new(Budget { chars: 12 });
        assert!(w.line("hello", Some(1)));
        assert!(!w.line("world, again", Some(2)));
        assert!(w.line("ok", Some(3)));
        let reply = w.finish("# h\n");
        assert_eq!(reply.text, "# h\nhello\nok\n");
        assert_eq!(reply.item_ids, [1, 3]);
        assert_eq!(Writer::new(Budget { chars: 9 }).finish("x").text, "");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
