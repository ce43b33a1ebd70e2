//! The read models against the real schema: a store made by the migrations, rows written as
//! their owners write them, and every answer compared with the JSON the api has always sent.

use crate::*;
use futures::StreamExt as _;
use serde_json::{Value, json};

/// A store with one session of each kind: `s1` with a prompt, a tool call, a memory item, a
/// summary, a checkpoint and a pattern; `s2` archived, in another project, with nothing derived.
async fn fixture() -> (tempfile::TempDir, store::Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = store::Store::open(&dir.path().join("mneme.db"))
        .await
        .unwrap();
    let now = common::time::now_ms();
    for sql in [
        format!(
            "INSERT INTO sessions (id, agent, project, cwd, model, started_at, ended_at,
                 end_reason, last_event_at, event_count, prompt_count, tool_count, error_count)
             VALUES ('s1', 'claude_code', '/p', '/p/src', 'opus', {now}, NULL, NULL, {now} + 5,
                     3, 1, 1, 0)"
        ),
        format!(
            "INSERT INTO sessions (id, agent, project, started_at, ended_at, end_reason,
                 last_event_at, archived_at)
             VALUES ('s2', 'codex', '/q', {now} - 9, {now} - 2, 'exit', {now} - 3, {now} - 1)"
        ),
        format!(
            "INSERT INTO observations (id, event_id, session_id, project, agent, kind, host_event,
                 tool_name, tool_use_id, title, body, content_hash, occurred_at, stored_at)
             VALUES (1, 'e1', 's1', '/p', 'claude_code', 'prompt', 'UserPromptSubmit', '', '',
                     'fix the build', 'fix the build please', 'h1', {now}, {now}),
                    (2, 'e2', 's1', '/p', 'claude_code', 'tool_failure', 'PostToolUse', 'Bash',
                     'call-1', 'cargo build', 'error[E0433]', 'h2', {now} + 1, {now} + 1)"
        ),
        r#"UPDATE observations SET meta = '{"host_fields":{"imported_from":"a.jsonl"}}'
           WHERE id = 2"#
            .to_owned(),
        format!(
            "INSERT INTO memory_items (id, source, source_id, kind, session_id, project, agent,
                 title, text, seq, files, concepts, text_hash, occurred_at, indexed_at)
             VALUES (7, 'observation', 1, 'prompt', 's1', '/p', 'claude_code', 'fix the build',
                     'fix the build please', 1, '', '', 't1', {now}, {now}),
                    (8, 'summary', 1, 'summary', 's1', '/p', 'claude_code', 'Summary',
                     'Summary text', 2, '', '', 't2', {now}, {now})"
        ),
        format!(
            "INSERT INTO session_summaries (session_id, project, status, trigger, request, done,
                 decisions, files_modified, text, last_observation_id, occurred_at, updated_at)
             VALUES ('s1', '/p', 'partial', 'threshold', 'fix the build', '[\"built\"]',
                     '[\"use sqlx\"]', '[\"/p/src/main.rs\"]', 'Summary\nmore', 2, {now},
                     {now} + 7)"
        ),
        format!(
            "INSERT INTO checkpoints (id, session_id, project, trigger, summary, decisions,
                 open_tasks, files_modified, tokens_before, tokens_after, text,
                 last_observation_id, occurred_at, updated_at)
             VALUES (3, 's1', '/p', 'pre_compact', 'halfway', 'not json', '[\"ship\"]', '[]',
                     900, 100, 'Checkpoint: halfway\nrest', 2, {now} + 2, {now} + 2)"
        ),
        format!(
            "INSERT INTO patterns (id, hash, kind, title, text, project, occurrences, sessions,
                 first_session_id, last_session_id, first_seen_at, last_seen_at, files,
                 updated_at)
             VALUES (4, 'ph', 'decision', 'use sqlx', 'We use sqlx.', '/p', 2, 1, 's1', 's1',
                     {now}, {now} + 1, '[\"/p/Cargo.toml\"]', {now})"
        ),
        "INSERT INTO pattern_occurrences (pattern_id, observation_id, role, session_id, project,
             occurred_at)
         VALUES (4, 1, 'statement', 's1', '/p', 0)"
            .to_owned(),
        format!(
            "INSERT INTO compressor_sessions (session_id, project, total_tokens, updated_at)
             VALUES ('s1', '/p', 1000, {now})"
        ),
        format!(
            "INSERT INTO collections (id, name, description, query, created_at, updated_at)
             VALUES (5, 'build', 'about the build', 'build', {now}, {now})"
        ),
        "INSERT INTO collection_items (collection_id, item_id, position)
         VALUES (5, 8, 0), (5, 7, 1)"
            .to_owned(),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(store.pool())
            .await
            .unwrap();
    }
    (dir, store)
}

/// When the fixture's first session started: the time every other row is set from.
async fn started(pool: &sqlx::SqlitePool) -> i64 {
    sqlx::query_scalar("SELECT started_at FROM sessions WHERE id = 's1'")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn value(model: &impl serde::Serialize) -> Value {
    serde_json::to_value(model).unwrap()
}

/// `model` is sent as the same bytes as `expected`, a `json!` with the fields in the order the
/// api has always listed them: serde_json keeps that order in this workspace's builds (and sorts
/// both alike where it does not), so the order is part of the answer.
#[track_caller]
fn assert_sent(model: &impl serde::Serialize, expected: Value) {
    assert_eq!(value(model).to_string(), expected.to_string());
}

#[tokio::test]
async fn sessions_answer_in_the_shape_the_api_always_sent() {
    let (_dir, store) = fixture().await;
    let pool = store.pool();
    let now = started(pool).await;
    let page = sessions(pool, "", Archived::Hide, 10, 0).await.unwrap();
    let s1 = json!({
        "id": "s1", "agent": "claude_code", "project": "/p", "cwd": "/p/src", "model": "opus",
        "started_at_ms": now, "ended_at_ms": null, "end_reason": null,
        "last_event_at_ms": now + 5, "events": 3, "prompts": 1, "tools": 1, "errors": 0,
        "archived_at_ms": null, "title": "fix the build",
    });
    assert_sent(
        &page,
        json!({"total": 1, "limit": 10, "offset": 0, "sessions": [s1]}),
    );
    let archived = sessions(pool, "", Archived::Only, 10, 0).await.unwrap();
    assert_eq!(archived.sessions[0].id, "s2");
    assert_eq!(archived.sessions[0].title, None);
    assert_eq!(
        sessions(pool, "/q", Archived::Include, 10, 0)
            .await
            .unwrap()
            .total,
        1
    );

    let detail = session(pool, "s1", 1, 1).await.unwrap().unwrap();
    // The page of a session was its list entry with the rest added after it.
    let mut expected = s1.clone();
    expected["observations"] = json!([{
        "id": 2, "kind": "tool_failure", "tool_name": "Bash", "title": "cargo build",
        "body": "error[E0433]", "occurred_at_ms": now + 1, "item_id": null,
    }]);
    expected["observations_offset"] = json!(1);
    expected["summary"] = json!({
        "status": "partial", "request": "fix the build", "done": ["built"],
        "decisions": ["use sqlx"], "open_items": [], "files_modified": ["/p/src/main.rs"],
        "text": "Summary\nmore", "compressor": "heuristic", "updated_at_ms": now + 7,
    });
    expected["checkpoints"] =
        value(&checkpoints(pool, "", "s1", 50, 0).await.unwrap())["checkpoints"].clone();
    assert_sent(&detail, expected);
    // With summaries, each list entry is the same entry with its summary after it.
    let summarised = sessions::sessions_with_summaries(pool, "", Archived::Include, 10, 0)
        .await
        .unwrap();
    let mut with_summary = s1.clone();
    with_summary["summary"] = value(&derived::summary(pool, "s1").await.unwrap());
    assert_eq!(summarised.total, 2);
    assert_sent(&summarised.sessions[0], with_summary);
    assert_eq!(
        summarised.sessions[0].summary.as_ref().unwrap().request,
        "fix the build"
    );
    assert_eq!(summarised.sessions[1].session.id, "s2");
    assert!(summarised.sessions[1].summary.is_none());
    let first = value(&session(pool, "s1", 1, 0).await.unwrap().unwrap());
    assert_eq!(first["observations"][0]["item_id"], 7);
    let s2 = value(&session(pool, "s2", 10, 0).await.unwrap().unwrap());
    assert_eq!(s2["summary"], Value::Null);
    assert_eq!(s2["checkpoints"], json!([]));
    assert!(session(pool, "nope", 10, 0).await.unwrap().is_none());
    assert_eq!(session_item_count(pool, "s1").await.unwrap(), 2);
}

#[tokio::test]
async fn derived_rows_answer_in_the_shape_the_api_always_sent() {
    let (_dir, store) = fixture().await;
    let pool = store.pool();
    let now = started(pool).await;
    // A list that is not JSON reads as an empty one.
    assert_sent(
        &checkpoints(pool, "/p", "", 10, 0).await.unwrap(),
        json!({"limit": 10, "offset": 0, "checkpoints": [{
            "id": 3, "session_id": "s1", "project": "/p", "trigger": "pre_compact",
            "summary": "halfway", "decisions": [], "open_tasks": ["ship"], "files_modified": [],
            "tokens_before": 900, "tokens_after": 100, "text": "Checkpoint: halfway\nrest",
            "compressor": "heuristic", "occurred_at_ms": now + 2,
        }]}),
    );
    assert!(
        checkpoints(pool, "/q", "", 10, 0)
            .await
            .unwrap()
            .checkpoints
            .is_empty()
    );
    let pattern = json!({
        "id": 4, "kind": "decision", "title": "use sqlx", "text": "We use sqlx.",
        "project": "/p", "occurrences": 2, "failures": 0, "sessions": 1, "first_seen_at_ms": now,
        "last_seen_at_ms": now + 1, "files": ["/p/Cargo.toml"],
    });
    assert_sent(
        &patterns(pool, "/p", "decision", 2, 5, 0).await.unwrap(),
        json!({"limit": 5, "offset": 0, "patterns": [pattern]}),
    );
    assert!(
        patterns(pool, "", "", 3, 5, 0)
            .await
            .unwrap()
            .patterns
            .is_empty()
    );
    assert_sent(
        &project_patterns(pool, "/p").await.unwrap(),
        json!([pattern]),
    );
    let summaries = project_summaries(pool, "/p").await.unwrap();
    assert_eq!(summaries[0].decisions.strings(), ["use sqlx"]);
    assert_eq!(summaries[0].files_modified.strings(), ["/p/src/main.rs"]);
}

#[tokio::test]
async fn stats_count_every_table_and_what_compression_saved() {
    let (_dir, store) = fixture().await;
    let pool = store.pool();
    let now = started(pool).await;
    let stats = stats(pool, 30).await.unwrap();
    assert_sent(
        &stats.counts,
        json!({
            "sessions": 2, "observations": 2, "memory_items": 2, "structured_observations": 0,
            "session_summaries": 1, "checkpoints": 1, "patterns": 1, "dead_letters": 0,
            "archived_sessions": 1,
        }),
    );
    assert_sent(
        &stats.kinds,
        json!([{"kind": "prompt", "items": 1}, {"kind": "summary", "items": 1}]),
    );
    assert_sent(
        &stats.projects[0],
        json!({"project": "/p", "sessions": 1, "events": 3, "last_event_at_ms": now + 5}),
    );
    let stats = value(&stats);
    let keys: Vec<&String> = stats.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5, "counts, kinds, projects, per_day, tokens");
    assert_eq!(stats["projects"][1]["sessions"], 1);
    // The two observations are a millisecond apart, which may be either side of midnight.
    let days = stats["per_day"].as_array().unwrap();
    assert_eq!(days.len(), 30, "every day of the range is listed");
    assert_eq!(days.last().unwrap()["day"], common::time::utc_day(now + 1));
    let total = |field: &str| days.iter().map(|d| d[field].as_i64().unwrap()).sum::<i64>();
    assert_eq!(
        (total("observations"), total("prompts"), total("errors")),
        (2, 1, 1)
    );
    // 12 characters of summary are 3 tokens.
    assert_eq!(
        stats["tokens"].to_string(),
        json!({"raw": 1000, "summaries": 3, "saved_by_summaries": 997, "saved_by_checkpoints": 800})
            .to_string()
    );
    let counts = counts(pool).await.unwrap();
    assert_eq!(counts.tables()[0], ("sessions", 2));
}

#[tokio::test]
async fn activity_counts_events_on_the_days_they_happened_up_to_the_newest() {
    const DAY: i64 = 86_400_000;
    let dir = tempfile::tempdir().unwrap();
    let store = store::Store::open(&dir.path().join("mneme.db"))
        .await
        .unwrap();
    let pool = store.pool();
    // "Now" is late November 2026; the history was made in February 2025 and imported today,
    // so every row is stored now and happened then.
    let now = 1_795_608_000_000; // 2026-11-25T12:00:00Z
    let newest = 1_739_188_800_000; // 2025-02-10T12:00:00Z
    let insert = async |id: i64, kind: &str, occurred_at: i64| {
        sqlx::query(
            "INSERT INTO observations (id, event_id, session_id, project, agent, kind,
                 host_event, title, body, content_hash, occurred_at, stored_at)
             VALUES (?1, 'e' || ?1, 'old', '/p', 'claude_code', ?2, '', 't', 'b', 'h' || ?1,
                     ?3, ?4)",
        )
        .bind(id)
        .bind(kind)
        .bind(occurred_at)
        .bind(now)
        .execute(pool)
        .await
        .unwrap();
    };

    // An empty store shows the days up to today.
    let empty = stats::activity(pool, 7, now).await.unwrap();
    assert_eq!(empty.len(), 7);
    assert_eq!(empty.last().unwrap().day.0, "2026-11-25");
    assert!(empty.iter().all(|d| d.observations == 0));

    insert(1, "prompt", newest).await;
    insert(2, "tool_failure", newest - 5).await;
    insert(3, "prompt", newest - DAY).await;
    insert(4, "post_tool", newest - 3 * DAY).await;
    // Forty days before the newest: outside a 30-day range, inside a 60-day one.
    insert(5, "post_tool", newest - 40 * DAY).await;

    let days = stats::activity(pool, 30, now).await.unwrap();
    assert_eq!(days.len(), 30);
    assert_eq!(days.first().unwrap().day.0, "2025-01-12");
    assert_eq!(days.last().unwrap().day.0, "2025-02-10");
    let counted: Vec<(&str, i64, i64, i64)> = days
        .iter()
        .filter(|d| d.observations > 0)
        .map(|d| (d.day.0.as_str(), d.observations, d.prompts, d.errors))
        .collect();
    assert_eq!(
        counted,
        [
            ("2025-02-07", 1, 0, 0),
            ("2025-02-09", 1, 1, 0),
            ("2025-02-10", 2, 1, 1)
        ]
    );
    let wider = stats::activity(pool, 60, now).await.unwrap();
    assert_eq!(wider.iter().map(|d| d.observations).sum::<i64>(), 5);
    assert_eq!(wider.last().unwrap().day.0, "2025-02-10");

    // An event stamped after now (a host whose clock runs ahead) never moves the range past
    // today, and is not counted on a day that has not come.
    insert(6, "prompt", now + 10 * DAY).await;
    let days = stats::activity(pool, 3, now).await.unwrap();
    assert_eq!(
        days.iter().map(|d| d.day.0.as_str()).collect::<Vec<_>>(),
        ["2026-11-23", "2026-11-24", "2026-11-25"]
    );
    assert!(days.iter().all(|d| d.observations == 0));
}

#[tokio::test]
async fn the_command_line_reads_sessions_history_and_titles() {
    let (_dir, store) = fixture().await;
    let pool = store.pool();
    let listed = session_list(pool, None, None, 10).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|s| (s.id.as_str(), s.observations))
            .collect::<Vec<_>>(),
        [("s1", 2), ("s2", 0)]
    );
    let codex = session_list(pool, Some("codex"), None, 10).await.unwrap();
    let s2 = sessions(pool, "/q", Archived::Include, 1, 0).await.unwrap();
    let started = s2.sessions[0].started_at_ms;
    assert_sent(
        &codex,
        json!([{"id": "s2", "agent": "codex", "project": "/q", "started_at_ms": started,
                "ended_at_ms": started + 7, "observations": 0}]),
    );
    assert!(
        session_list(pool, None, Some("/nowhere"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let events = session_events(pool, "s1").await.unwrap();
    let imported: Vec<_> = events
        .iter()
        .map(|e| (e.event_id.as_str(), e.imported_from.as_deref()))
        .collect();
    assert_eq!(imported, [("e1", None), ("e2", Some("a.jsonl"))]);
    assert_eq!(projects(pool).await.unwrap(), ["/p", "/q"]);
    let agents = agent_activity(pool).await.unwrap();
    assert_eq!(
        agents
            .iter()
            .map(|a| (a.agent.as_str(), a.sessions))
            .collect::<Vec<_>>(),
        [("claude_code", 1), ("codex", 1)]
    );
    let history = project_history(pool, "/p").await.unwrap();
    assert_eq!(history[0].request.as_deref(), Some("fix the build"));
    assert_eq!(history[0].files_modified.strings().len(), 1);
    let history = project_history(pool, "/q").await.unwrap();
    assert_eq!(
        (history[0].request.as_deref(), history[0].status.as_deref()),
        (None, None)
    );
    assert!(history[0].files_modified.strings().is_empty());

    for (of, id, expected) in [
        (Titled::Observation, 1, Some("fix the build")),
        (Titled::Pattern, 4, Some("use sqlx")),
        (Titled::Summary, 1, Some("Summary")),
        (Titled::Checkpoint, 3, Some("Checkpoint: halfway")),
        (Titled::Structured, 1, None),
    ] {
        assert_eq!(
            title(pool, of, id).await.unwrap().as_deref(),
            expected,
            "{of:?}"
        );
    }
}

#[tokio::test]
async fn an_export_holds_every_row_between_its_header_and_its_end() {
    let (_dir, store) = fixture().await;
    let chunks: Vec<String> = export_lines(store.pool().clone())
        .map(Result::unwrap)
        .collect()
        .await;
    let lines: Vec<Value> = chunks
        .concat()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "mneme",
            "session",
            "session",
            "observation",
            "observation",
            "memory_item",
            "memory_item",
            "collection",
            "end"
        ]
    );
    assert_eq!(lines[0]["format"], format::FORMAT);
    assert_eq!(
        lines[2]["archived_at_ms"],
        lines[2]["ended_at_ms"].as_i64().unwrap() + 1
    );
    assert_eq!(
        lines[4]["meta"],
        r#"{"host_fields":{"imported_from":"a.jsonl"}}"#
    );
    assert_eq!(lines[5]["source_event_id"], "e1");
    assert_eq!(lines[6]["source_event_id"], "");
    assert_eq!(lines[7]["item_ids"], json!([8, 7]));
    assert_eq!(
        lines[8],
        json!({"type": "end", "sessions": 2, "observations": 2, "memory_items": 2,
               "collections": 1})
    );
    // Every row line reads back as the importer reads it.
    for line in &chunks.concat().lines().collect::<Vec<_>>()[..8] {
        serde_json::from_str::<format::Line>(line).unwrap();
    }
}

#[test]
fn a_list_that_is_not_a_json_array_reads_as_empty() {
    assert_eq!(JsonList::from("{\"a\":1}".to_owned()), JsonList::default());
    assert_eq!(JsonList::from(None), JsonList::default());
    assert_eq!(
        JsonList::from("[\"a\", 1]".to_owned()).0,
        json!(["a", 1]),
        "kept whole for the api"
    );
    assert!(JsonList::from("[\"a\", 1]".to_owned()).strings().is_empty());
}
