//! `mneme search`, `mneme timeline`, `mneme get` and `mneme context`: progressive disclosure
//! from the command line, answered by retrieval over NATS. When retrieval is not running they
//! read the store directly (full-text only), so memory stays reachable.

use anyhow::Context as _;
use common::CommonArgs;
use common::nats::ask;
use proto::subjects;
use retrieval::search::Searcher;
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// What to look for.
    #[arg(required = true)]
    query: Vec<String>,
    /// Only this project (its git root path).
    #[arg(long)]
    project: Option<String>,
    /// Only this session (repeatable).
    #[arg(long = "session")]
    sessions: Vec<String>,
    /// Never this session (repeatable).
    #[arg(long = "exclude-session")]
    exclude_sessions: Vec<String>,
    /// Only this kind: prompt, tool, error, reply, compaction, summary, checkpoint, pattern, or a
    /// structured type (bugfix, feature, refactor, change, discovery, decision); repeatable.
    #[arg(long = "kind")]
    kinds: Vec<String>,
    /// Only items touching a file whose path contains this.
    #[arg(long)]
    file: Option<String>,
    /// Only items tagged with this concept (for example rust, shell, error).
    #[arg(long)]
    concept: Option<String>,
    /// Only items since this date (YYYY-MM-DD) or age (7d, 12h).
    #[arg(long)]
    since: Option<String>,
    /// Only items before this date (YYYY-MM-DD) or age (7d, 12h).
    #[arg(long)]
    until: Option<String>,
    /// hybrid, fts or vector.
    #[arg(long, default_value = "hybrid")]
    mode: String,
    /// At most this many results (sessions, with --group session).
    #[arg(long, default_value_t = 10)]
    limit: u32,
    /// session: which sessions dealt with this, ranked by the evidence each holds, each with
    /// its best hits.
    #[arg(long, value_parser = ["session"])]
    group: Option<String>,
    /// When the question is asked (RFC 3339, such as 2026-02-12T15:00:00Z; default now): time
    /// words in the query (yesterday, two weeks ago, in May) are read against it.
    #[arg(long)]
    as_of: Option<String>,
    /// Also search other wordings of the query written by the compressor's LLM
    /// (MNEME_COMPRESS_LLM_URL), within its token budgets; without one, the query alone is
    /// searched and the reason is printed.
    #[arg(long)]
    rewrite: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let as_of_ms = match args.as_of.as_deref() {
        None => 0,
        Some(text) => common::time::parse_rfc3339_ms(text.trim()).with_context(|| {
            format!("--as-of {text:?} is not an RFC 3339 time such as 2026-02-12T15:00:00Z")
        })?,
    };
    let request = proto::SearchRequest {
        query: args.query.join(" "),
        project: args.project.clone().unwrap_or_default(),
        limit: args.limit,
        sessions: args.sessions.clone(),
        exclude_sessions: args.exclude_sessions.clone(),
        kinds: args.kinds.clone(),
        file: args.file.clone().unwrap_or_default(),
        concept: args.concept.clone().unwrap_or_default(),
        since_ms: args
            .since
            .as_deref()
            .map(parse_time)
            .transpose()?
            .unwrap_or(0),
        until_ms: args
            .until
            .as_deref()
            .map(parse_time)
            .transpose()?
            .unwrap_or(0),
        mode: args.mode.clone(),
        group: args.group.clone().unwrap_or_default(),
        as_of_ms,
        rewrite: args.rewrite,
        ..Default::default()
    };
    // A rewrite waits for the LLM too (retrieval gives it ten seconds).
    let wait = Duration::from_secs(if args.rewrite { 20 } else { 5 });
    let answered =
        ask::<proto::SearchReply>(&args.common, subjects::RETRIEVAL_SEARCH, &request, wait).await;
    let reply = match answered {
        Some(reply) => reply,
        None => {
            // Retrieval is not running: read the store directly, which needs no service.
            let searcher = local_searcher(&args.common).await?;
            let (hits, mode) = searcher.search(&request).await?;
            proto::SearchReply {
                hits,
                mode: format!("{mode} (retrieval not running; read from the store)"),
                rewrite_error: if args.rewrite {
                    "retrieval is not running".to_owned()
                } else {
                    String::new()
                },
                ..Default::default()
            }
        }
    };
    if !reply.error.is_empty() {
        anyhow::bail!("search failed: {}", reply.error);
    }
    // Retrieval sends a grouped answer session by session: each session's hits together.
    let grouped = request.group == retrieval::search::GROUP_SESSION;
    let sessions: Vec<&[proto::SearchHit]> = if grouped {
        reply
            .hits
            .chunk_by(|a, b| a.session_id == b.session_id)
            .collect()
    } else {
        Vec::new()
    };
    if args.json {
        let hit_json = |h: &proto::SearchHit| {
            json!({"id": h.id, "session_id": h.session_id, "project": h.project,
                "kind": h.kind, "title": h.title, "snippet": h.snippet,
                "occurred_at_ms": h.occurred_at_ms, "score": h.score,
                "relevance": h.relevance, "found_by": h.found_by, "origin": h.origin})
        };
        let hits: Vec<Value> = reply.hits.iter().map(hit_json).collect();
        let mut out = json!({"query": request.query, "mode": reply.mode, "hits": hits});
        if args.rewrite {
            out["rewrites"] = json!(reply.rewrites);
            out["rewrite_error"] = json!(reply.rewrite_error);
        }
        if grouped {
            out["sessions"] = sessions
                .iter()
                .map(|run| {
                    json!({"session_id": run[0].session_id, "project": run[0].project,
                        "score": run[0].score,
                        "hits": run.iter().map(hit_json).collect::<Vec<_>>()})
                })
                .collect();
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if args.rewrite {
        if reply.rewrites.is_empty() {
            println!("(not reworded: {})", reply.rewrite_error);
        } else {
            println!("(also searched: {})", reply.rewrites.join(" | "));
        }
    }
    if reply.hits.is_empty() {
        println!("no results for {:?} ({})", request.query, reply.mode);
    }
    let print_hit = |hit: &proto::SearchHit, indent: &str| {
        let origin = if hit.origin.is_empty() {
            String::new()
        } else {
            format!(" (from {})", hit.origin)
        };
        println!(
            "{indent}#{:<6} {} {:<10} {}{origin}",
            hit.id,
            common::time::utc_day(hit.occurred_at_ms),
            hit.kind,
            hit.title
        );
        println!("{indent}        {}", hit.snippet);
    };
    if grouped {
        for run in sessions {
            println!(
                "session {} ({}) score {:.3}",
                run[0].session_id, run[0].project, run[0].score
            );
            for hit in run {
                print_hit(hit, "  ");
            }
        }
        return Ok(());
    }
    for hit in &reply.hits {
        print_hit(hit, "");
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct TimelineArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The item to centre on.
    id: i64,
    /// Items on each side.
    #[arg(long, default_value_t = 5)]
    radius: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn timeline(args: TimelineArgs) -> anyhow::Result<()> {
    let request = proto::TimelineRequest {
        id: args.id,
        radius: args.radius,
    };
    let reply = match ask::<proto::ItemsReply>(
        &args.common,
        subjects::RETRIEVAL_TIMELINE,
        &request,
        Duration::from_secs(5),
    )
    .await
    {
        Some(reply) => reply,
        None => {
            let searcher = local_searcher(&args.common).await?;
            match retrieval::items::timeline(&searcher.pool, args.id, args.radius).await? {
                Some((items, anchor)) => proto::ItemsReply {
                    items,
                    anchor: anchor as u32,
                    error: String::new(),
                },
                None => proto::ItemsReply {
                    error: format!("no memory item {}", args.id),
                    ..Default::default()
                },
            }
        }
    };
    if !reply.error.is_empty() {
        anyhow::bail!("{}", reply.error);
    }
    if args.json {
        let items: Vec<Value> = reply.items.iter().map(item_json).collect();
        let out = json!({"anchor": reply.anchor, "items": items});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for (i, item) in reply.items.iter().enumerate() {
        let marker = if i as u32 == reply.anchor { ">" } else { " " };
        println!(
            "{marker} #{:<6} {} {:<10} {}",
            item.id,
            common::time::utc_day(item.occurred_at_ms),
            item.kind,
            item.title
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Item ids.
    #[arg(required = true)]
    ids: Vec<i64>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn get(args: GetArgs) -> anyhow::Result<()> {
    let request = proto::GetRequest {
        ids: args.ids.clone(),
    };
    let reply = match ask::<proto::ItemsReply>(
        &args.common,
        subjects::RETRIEVAL_GET,
        &request,
        Duration::from_secs(5),
    )
    .await
    {
        Some(reply) => reply,
        None => {
            let searcher = local_searcher(&args.common).await?;
            proto::ItemsReply {
                items: retrieval::items::get(&searcher.pool, &args.ids).await?,
                ..Default::default()
            }
        }
    };
    if !reply.error.is_empty() {
        anyhow::bail!("{}", reply.error);
    }
    if args.json {
        let items: Vec<Value> = reply.items.iter().map(item_json).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"items": items}))?
        );
        return Ok(());
    }
    if reply.items.is_empty() {
        println!("no such items");
    }
    for item in reply.items {
        println!(
            "#{} {} {} in session {} ({})",
            item.id,
            item.kind,
            common::time::utc_day(item.occurred_at_ms),
            item.session_id,
            item.project
        );
        println!("title: {}", item.title);
        if !item.files.is_empty() {
            println!("files: {}", item.files.join(", "));
        }
        println!("{}", item.text);
        if !item.input.is_empty() {
            println!("input: {}", item.input);
        }
        if !item.output.is_empty() {
            println!("output:\n{}", item.output);
        }
        println!();
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The project (git root path) the agent works in.
    #[arg(long)]
    project: String,
    /// The prompt, for per-prompt context; without it, session-start context.
    #[arg(long)]
    prompt: Option<String>,
    /// The current session, whose own items are not injected.
    #[arg(long, default_value = "")]
    session: String,
    /// Budget in tokens (default: the service's).
    #[arg(long, default_value_t = 0)]
    budget_tokens: u32,
    /// Print JSON instead of the text the agent would get.
    #[arg(long)]
    json: bool,
}

pub async fn context(args: ContextArgs) -> anyhow::Result<()> {
    use proto::context_request::Moment;
    let request = proto::ContextRequest {
        moment: if args.prompt.is_some() {
            Moment::Prompt
        } else {
            Moment::SessionStart
        } as i32,
        project: args.project.clone(),
        session_id: args.session.clone(),
        prompt: args.prompt.clone().unwrap_or_default(),
        budget_tokens: args.budget_tokens,
        ..Default::default()
    };
    let reply = ask::<proto::ContextReply>(
        &args.common,
        subjects::RETRIEVAL_CONTEXT,
        &request,
        Duration::from_secs(5),
    )
    .await
    .context("retrieval is not answering: start it with `mneme up`")?;
    if args.json {
        let out = json!({"text": reply.text, "item_ids": reply.item_ids,
            "chars": reply.text.chars().count(), "tokens": retrieval::text::tokens(&reply.text)});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if reply.text.is_empty() {
        println!("(nothing would be injected)");
    } else {
        print!("{}", reply.text);
    }
    Ok(())
}

fn item_json(item: &proto::Item) -> Value {
    json!({"id": item.id, "kind": item.kind, "session_id": item.session_id,
        "project": item.project, "agent": item.agent, "title": item.title, "text": item.text,
        "tool_name": item.tool_name, "files": item.files, "concepts": item.concepts,
        "occurred_at_ms": item.occurred_at_ms, "source": item.source,
        "source_id": item.source_id, "input": item.input, "output": item.output})
}

/// A full-text searcher over the store, for when retrieval is not running.
async fn local_searcher(common: &CommonArgs) -> anyhow::Result<Searcher> {
    let store = store::Store::open_read_only(&common.db_path())
        .await
        .context("retrieval is not answering and the store cannot be opened")?;
    Ok(Searcher {
        pool: store.pool().clone(),
        vectors: None,
        // Never loaded: a one-off search is answered by FTS5 without reading every item.
        lexical: Default::default(),
        tuning: Default::default(),
    })
}

/// A time filter: `YYYY-MM-DD` (UTC midnight) or an age such as `7d`, `12h`, `30m`.
fn parse_time(text: &str) -> anyhow::Result<i64> {
    let text = text.trim();
    for (suffix, unit) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)] {
        if let Some(n) = text
            .strip_suffix(suffix)
            .and_then(|n| n.parse::<i64>().ok())
        {
            return Ok(common::time::now_ms() - n * unit);
        }
    }
    let parts: Vec<i64> = text
        .split('-')
        .map(|p| p.parse::<i64>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("{text:?} is not a date (YYYY-MM-DD) or an age (7d, 12h)"))?;
    let [y, m, d] = parts[..] else {
        anyhow::bail!("{text:?} is not a date (YYYY-MM-DD) or an age (7d, 12h)");
    };
    anyhow::ensure!(
        (1..=12).contains(&m) && (1..=31).contains(&d),
        "{text:?} is not a valid date"
    );
    Ok(common::time::midnight_ms(y, m, d))
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_parse_as_dates_or_ages() {
        for day in ["2000-02-29", "2026-11-18", "1970-01-01"] {
            assert_eq!(common::time::utc_day(parse_time(day).unwrap()), day);
        }
        let week = parse_time("7d").unwrap();
        assert!((common::time::now_ms() - week - 7 * 86_400_000).abs() < 5_000);
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2026-13-01").is_err());
    }
}
