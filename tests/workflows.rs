//! Procedural memory through its real entry points: turns of work captured by the real hook
//! (or imported from real transcripts) become workflows, counted as they work and fail again;
//! a workflow reported over MCP counts with them; a prompt like a past task gets its workflow
//! first in the context the hook injects; MEMORY.md lists them.

use crate::api::Http;
use crate::harness::{App, transcripts_dir};
use crate::import::import;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "workflow-token-0123456789";

/// Run the hook with one Claude Code payload; its stdout as JSON (null when empty).
fn hook(app: &App, payload: Value) -> Value {
    let (output, _) = app.hook(payload.to_string().as_bytes());
    assert!(output.status.success(), "hook failed: {output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

/// What the hook injects with `prompt` in a session of `cwd` (empty when nothing).
fn ask(app: &App, session: &str, cwd: &str, prompt: &str) -> String {
    hook(
        app,
        json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": cwd,
               "transcript_path": "/dev/null", "prompt": prompt}),
    )["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// One turn of a Claude Code session in /w/lib: the prompt, the tool calls, the end of the turn.
fn turn(app: &App, session: &str, prompt: &str, calls: &[(&str, &str, Value, bool)]) {
    let base = json!({"session_id": session, "cwd": "/w/lib", "transcript_path": "/dev/null"});
    let with = |mut extra: Value| {
        for (k, v) in base.as_object().unwrap() {
            extra[k] = v.clone();
        }
        extra
    };
    hook(
        app,
        with(json!({"hook_event_name": "UserPromptSubmit", "prompt": prompt})),
    );
    for (i, (tool, key, value, ok)) in calls.iter().enumerate() {
        let input = json!({ *key: value });
        let payload = if *ok {
            json!({"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": input,
                   "tool_use_id": format!("{session}-{i}"), "tool_response": {"stdout": "ok"}})
        } else {
            json!({"hook_event_name": "PostToolUseFailure", "tool_name": tool, "tool_input": input,
                   "tool_use_id": format!("{session}-{i}"),
                   "error": "Exit code 2\nerror: tag v1.2.0 already exists"})
        };
        hook(app, with(payload));
    }
    hook(app, with(json!({"hook_event_name": "Stop"})));
}

async fn workflow_row(app: &App) -> Option<(i64, String, i64, i64)> {
    let store = app.store().await;
    sqlx::query_as(
        "SELECT id, text, occurrences,
             (SELECT count(*) FROM pattern_occurrences o
              WHERE o.pattern_id = patterns.id AND o.role = 'failure')
         FROM patterns WHERE kind = 'workflow' AND project = '/w/lib'",
    )
    .fetch_optional(store.pool())
    .await
    .unwrap()
}

async fn wait_for_runs(app: &App, worked: i64, failed: i64) -> (i64, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let last = workflow_row(app).await;
        if let Some((id, text, w, f)) = &last
            && (*w, *f) == (worked, failed)
        {
            return (*id, text.clone());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected {worked} worked and {failed} failed, have {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_counted_as_it_works_and_fails_and_offered_for_a_similar_request() {
    let mut app = App::start().await;
    let base = app
        .start_api(api::ApiArgs {
            token: Some(TOKEN.to_owned()),
            ..Default::default()
        })
        .await;

    // The first run: reading around, a failed try that is then fixed, and the release.
    let release = "release version 1.2 of the library with a changelog entry";
    turn(
        &app,
        "wf-1",
        release,
        &[
            ("Read", "file_path", json!("/w/lib/CHANGELOG.md"), true),
            ("Bash", "command", json!("git status"), true),
            ("Edit", "file_path", json!("/w/lib/CHANGELOG.md"), true),
            (
                "Bash",
                "command",
                json!("cd /w/lib && make release 2>&1 | tail -20"),
                false,
            ),
            ("Bash", "command", json!("git tag -d v1.2.0"), true),
            (
                "Bash",
                "command",
                json!("cd /w/lib && make release 2>&1 | tail -20"),
                true,
            ),
            ("Grep", "pattern", json!("version"), true),
        ],
    );
    let (id, text) = wait_for_runs(&app, 1, 0).await;
    assert!(
        text.contains(
            "Steps: edit CHANGELOG.md → `git tag -d v1.2.0` → `make release`\nWorked once."
        ),
        "reads, listings and the failed try are not steps: {text}"
    );

    // The second run of the same steps fails at the end: the workflow says so.
    turn(
        &app,
        "wf-2",
        "release version 1.3 of the library",
        &[
            ("Edit", "file_path", json!("/w/lib/CHANGELOG.md"), true),
            ("Bash", "command", json!("git tag -d v1.3.0"), true),
            ("Bash", "command", json!("make release"), false),
        ],
    );
    let (same, text) = wait_for_runs(&app, 1, 1).await;
    assert_eq!(same, id, "one workflow, two runs");
    assert!(
        text.contains("Worked once; failed once, last on") && text.contains("at `make release`"),
        "{text}"
    );
    assert!(
        text.contains("`git tag -d v1.2.0`"),
        "the steps shown are the ones that worked: {text}"
    );

    // A run reported over MCP counts with the others.
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(TOKEN),
    );
    let client = ().serve(transport).await.expect("initialise over http");
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "record_workflow"));
    let result = client
        .call_tool(
            CallToolRequestParams::new("record_workflow").with_arguments(
                json!({
                    "situation": "release a new version of the library",
                    "steps": ["Edit CHANGELOG.md", "git tag -d v1.4.0", "make release"],
                    "outcome": "success",
                    "project": "/w/lib",
                })
                .as_object()
                .cloned()
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let (_, text) = wait_for_runs(&app, 2, 1).await;
    assert!(text.contains("Worked twice; failed once"), "{text}");
    // An outcome that is neither is refused, and changes nothing.
    let refused = client
        .call_tool(
            CallToolRequestParams::new("record_workflow").with_arguments(
                json!({"situation": "release", "steps": ["make release"], "outcome": "maybe"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    client.cancel().await.unwrap();

    // The REST patterns page and the dashboard's list count the failures.
    let http = Http::new(&base);
    let (status, page) = http.get("/v1/patterns?kind=workflow").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{page}");
    assert_eq!(page["patterns"][0]["failures"], 1, "{page}");
    assert_eq!(page["patterns"][0]["occurrences"], 2, "{page}");

    // A request like the release gets the workflow first in what the agent is given; an
    // unrelated one does not.
    // The pattern's item is replaced at each revision, so which item is offered is read from
    // the context and traced back to the pattern.
    let offered_pattern = |context: &str| -> Option<i64> {
        let section = &context[context.find("## Workflows that worked")?..];
        let start = section.find("- [#")? + 4;
        section[start..]
            .split(']')
            .next()
            .and_then(|id| id.parse::<i64>().ok())
    };
    let pattern_of = |item: i64| {
        let app = &app;
        async move {
            let store = app.store().await;
            let (pattern,): (i64,) = sqlx::query_as(
                "SELECT source_id FROM memory_items WHERE id = ? AND source = 'pattern'",
            )
            .bind(item)
            .fetch_one(store.pool())
            .await
            .unwrap();
            pattern
        }
    };
    let ask = |prompt: &str| ask(&app, "wf-3", "/w/lib", prompt);
    // The revised pattern is found by full text at once, but offered as a workflow only once
    // its meaning is known too (the relevance a workflow needs counts both), which on a busy
    // machine is after its embedding: wait for the section, not just the text.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let context = loop {
        let context = ask("cut a new release of the library, version 2.0");
        if context.contains("Worked twice") && context.contains("## Workflows that worked") {
            break context;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no workflow offered: {context}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let workflows = context
        .find("## Workflows that worked for a request like this")
        .expect("a workflow section");
    assert!(
        context.find("- [#").is_some_and(|first| first > workflows),
        "the workflow comes before any other memory: {context}"
    );
    let item = offered_pattern(&context).expect("an offered item");
    assert_eq!(pattern_of(item).await, id, "{context}");
    assert!(context.contains("`make release`"), "{context}");
    let unrelated = ask("why does the websocket drop the connection after thirty seconds");
    assert!(!unrelated.contains("## Workflows"), "{unrelated}");

    // MEMORY.md lists the workflow with its steps and record.
    let out_dir = tempfile::tempdir().unwrap();
    let output = app.mneme(&[
        "export",
        "--markdown",
        "--dir",
        out_dir.path().to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let memory = walk_files(out_dir.path())
        .into_iter()
        .find(|p| p.ends_with("MEMORY.md"))
        .expect("a MEMORY.md");
    let memory = std::fs::read_to_string(memory).unwrap();
    assert!(memory.contains("## Workflows"), "{memory}");
    assert!(
        memory.contains("Steps: edit CHANGELOG.md → `git tag -d v1.4.0` → `make release`")
            && memory.contains("Worked twice; failed once"),
        "{memory}"
    );
    app.stop_services().await;
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Steps a workflow must never hold: reading, listing and searching, in any form the real
/// transcripts use. Written from the tools' meaning, independently of the pattern service.
fn only_looks(step: &str) -> bool {
    let step = step.trim_matches('`');
    let looking_tools = [
        "Read",
        "Grep",
        "Glob",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
        "Task",
    ];
    let looking_commands = [
        "ls",
        "cat ",
        "head ",
        "tail ",
        "grep ",
        "rg ",
        "find ",
        "git status",
        "git diff",
        "git log",
        "git show",
        "bd show",
        "bd ready",
        "bd list",
        "pwd",
        "echo ",
    ];
    looking_tools.contains(&step)
        || looking_commands
            .iter()
            .any(|c| step == c.trim() || step.starts_with(c))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_transcripts_give_workflows_without_read_only_steps() {
    let app = App::start().await;
    let dir = transcripts_dir();
    let imported = import(&app, &["claude-code", "--path", dir.to_str().unwrap()]);
    let published = imported["published"].as_i64().unwrap_or_else(|| {
        panic!("no published count in {imported}");
    });
    assert!(published > 1000, "{imported}");
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            published,
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(stored, published);
    app.wait_for_count(
        "SELECT count(*) FROM observations o JOIN pattern_sessions s ON s.session_id = o.session_id
         WHERE o.id <= s.cursor",
        published,
        Duration::from_secs(120),
    )
    .await;

    let store = app.store().await;
    let workflows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT title, signature, occurrences FROM patterns WHERE kind = 'workflow'",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let worked = workflows.iter().filter(|(.., n)| *n >= 1).count();
    assert!(worked >= 3, "{workflows:#?}");
    for (title, signature, _) in &workflows {
        let signature: Value = serde_json::from_str(signature).unwrap();
        let steps: Vec<&str> = signature["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert!(steps.len() >= 2, "{title}: {steps:?}");
        for step in &steps {
            assert!(!only_looks(step), "{title}: a read-only step {step:?}");
        }
        let situation = signature["situation"].as_str().unwrap();
        assert!(
            situation.split_whitespace().count() >= 4 && !situation.starts_with('<'),
            "{title}: the situation is a request: {situation}"
        );
    }
}

/// A task from a real transcript comes back as its workflow when a like request is made in the
/// same project: one transcript imported, its items embedded, then the hook asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_task_asked_again_gets_its_workflow_first() {
    let app = App::start().await;
    // The session of bead spotter-dov: its first turn ends with edits and a status update.
    let dir = tempfile::tempdir().unwrap();
    let name = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl";
    std::fs::copy(transcripts_dir().join(name), dir.path().join(name)).unwrap();
    import(
        &app,
        &["claude-code", "--path", dir.path().to_str().unwrap()],
    );
    let store = app.store().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let project = loop {
        // A workflow that worked, indexed and embedded: patterns are embedded as soon as
        // they are indexed, ahead of the session's raw items.
        let row: Option<(i64, String)> = sqlx::query_as(
            "SELECT m.id, m.project FROM patterns p
             JOIN memory_items m ON m.source = 'pattern' AND m.source_id = p.id
             WHERE p.kind = 'workflow' AND p.occurrences >= 1
               AND EXISTS (SELECT 1 FROM embedding_cache e WHERE e.text_hash = m.text_hash)
             ORDER BY m.id LIMIT 1",
        )
        .fetch_optional(store.pool())
        .await
        .unwrap();
        if let Some((_, project)) = row {
            break project;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no workflow embedded in time"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let ask = |prompt: &str| ask(&app, "again", &project, prompt);
    // The workflow may be rewritten a few times more while the session is walked; each
    // revision is embedded as it is indexed.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let context = loop {
        let context = ask(
            "Work on bead spotter-k2p. Run bd show spotter-k2p for the details and bd ready to \
             see which subtask is next, then start on it.",
        );
        if context.contains("## Workflows") {
            break context;
        }
        if std::time::Instant::now() > deadline {
            let search = app.mneme(&[
                "search",
                "Work on bead spotter-k2p. Run bd show spotter-k2p",
                "--project",
                &project,
                "--kind",
                "pattern",
                "--concept",
                "workflow",
                "--json",
            ]);
            panic!(
                "no workflow offered: {context}\n{}",
                String::from_utf8_lossy(&search.stdout)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Either of the session's two workflows fits: both answer the same request.
    let heading = context
        .find("## Workflows that worked for a request like this")
        .unwrap();
    assert!(
        context[heading..].contains("] workflow: When asked: Work on bead spotter-dov."),
        "{context}"
    );
    let unrelated = ask("what is the difference between a GenServer call and a cast in Elixir");
    assert!(!unrelated.contains("## Workflows"), "{unrelated}");
}
