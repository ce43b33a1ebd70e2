//! Retrieval through its real entry points: hook events in, NATS request/reply out, with the
//! real MiniLM model, sqlite-vec and FTS5.

use crate::harness::{App, retrieval_args};
use proto::context_request::Moment;
use proto::subjects;
use proto::{ContextReply, ContextRequest, ItemsReply, SearchReply, SearchRequest};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn prompt(session: &str, cwd: &str, text: &str) -> Vec<u8> {
    json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": cwd,
        "transcript_path": "/tmp/t.jsonl", "prompt": text})
    .to_string()
    .into_bytes()
}

fn tool(session: &str, cwd: &str, id: &str, name: &str, input: Value, response: Value) -> Vec<u8> {
    json!({"hook_event_name": "PostToolUse", "session_id": session, "cwd": cwd,
        "transcript_path": "/tmp/t.jsonl", "tool_name": name, "tool_use_id": id,
        "tool_input": input, "tool_response": response})
    .to_string()
    .into_bytes()
}

fn query(text: &str, project: &str) -> SearchRequest {
    SearchRequest {
        query: text.to_owned(),
        project: project.to_owned(),
        limit: 10,
        ..Default::default()
    }
}

async fn search(app: &App, request: SearchRequest) -> SearchReply {
    let reply: SearchReply = app.ask(subjects::RETRIEVAL_SEARCH, &request).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    reply
}

fn titles(reply: &SearchReply) -> Vec<&str> {
    reply.hits.iter().map(|h| h.title.as_str()).collect()
}

const WEBSOCKET: &str =
    "the websocket connection keeps dropping and has to reconnect every few minutes";
const BUDGET: &str = "the quarterly marketing budget spreadsheet lives in folder hx9041";

/// A project about websockets, plus one unrelated note with a rare folder name.
async fn seeded() -> (App, String) {
    let app = App::start().await;
    let cwd = "/work/seeded";
    let mut texts = vec![
        WEBSOCKET,
        "websocket handshake fails behind the corporate proxy",
        "add a heartbeat ping to the websocket client",
        "websocket messages arrive out of order under load",
        "log every websocket close code with its reason",
        "the websocket server leaks file descriptors on close",
        "compress websocket frames with permessage-deflate",
        "reconnect the websocket with exponential backoff",
        "websocket tests time out on the ci runner",
        "add a dark mode toggle to the settings page",
        "write the release notes for version two",
    ];
    texts.sort();
    for (n, text) in texts.iter().enumerate() {
        assert!(
            app.hook(&prompt(&format!("s{}", n % 4), cwd, text))
                .0
                .status
                .success()
        );
    }
    // On its own in its session, so no neighbour brings it along.
    assert!(app.hook(&prompt("solo", cwd, BUDGET)).0.status.success());
    app.wait_indexed(texts.len() as i64 + 1).await;
    (app, cwd.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_search_finds_what_either_retriever_alone_misses() {
    let (app, project) = seeded().await;
    // No word in common with the dropping-connection prompt: only meaning connects them.
    let semantic = "socket disconnects periodically";
    let fts = search(
        &app,
        SearchRequest {
            mode: "fts".into(),
            ..query(semantic, &project)
        },
    )
    .await;
    assert_eq!(fts.mode, "fts");
    assert!(!titles(&fts).contains(&WEBSOCKET), "{:?}", titles(&fts));
    let hybrid = search(
        &app,
        SearchRequest {
            limit: 3,
            ..query(semantic, &project)
        },
    )
    .await;
    assert_eq!(hybrid.mode, "hybrid");
    let hit = hybrid
        .hits
        .iter()
        .find(|h| h.title == WEBSOCKET)
        .unwrap_or_else(|| panic!("{:?}", titles(&hybrid)));
    assert_eq!(hit.found_by, ["vector"]);

    // A question about websockets that also names a rare folder: the model ranks the budget
    // note last and under its noise floor, full-text finds the folder name.
    let lexical = "websocket frames dropped under load, hx9041";
    let vector = search(
        &app,
        SearchRequest {
            mode: "vector".into(),
            ..query(lexical, &project)
        },
    )
    .await;
    assert_eq!(vector.mode, "vector");
    assert!(!titles(&vector).contains(&BUDGET), "{:?}", titles(&vector));
    let hybrid = search(
        &app,
        SearchRequest {
            limit: 5,
            ..query(lexical, &project)
        },
    )
    .await;
    let hit = hybrid
        .hits
        .iter()
        .find(|h| h.title == BUDGET)
        .unwrap_or_else(|| panic!("{:?}", titles(&hybrid)));
    assert_eq!(hit.found_by, ["fts"]);

    // Compact index entries: a short title and snippet, no full text.
    for hit in &hybrid.hits {
        assert!(hit.snippet.chars().count() <= 202 && hit.title.chars().count() <= 120);
        assert!(hit.relevance >= 0.0 && hit.relevance <= 1.0);
    }
    // Another project's query sees none of this, and a query about nothing stored finds nothing.
    assert!(
        search(&app, query(semantic, "/elsewhere"))
            .await
            .hits
            .is_empty()
    );
    assert!(
        search(&app, query("sourdough bread at high altitude", &project))
            .await
            .hits
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_narrow_both_retrievers() {
    let app = App::start_core().await;
    let cwd = "/work/filters";
    app.hook(&prompt("f1", cwd, "make the parser reject trailing commas"));
    app.hook(&tool(
        "f1",
        cwd,
        "t1",
        "Edit",
        json!({"file_path": "/work/filters/src/parser.rs", "old_string": "a", "new_string": "b"}),
        json!({"filePath": "/work/filters/src/parser.rs"}),
    ));
    app.hook(&tool(
        "f2",
        cwd,
        "t2",
        "Bash",
        json!({"command": "pytest tests/test_parser.py"}),
        json!({"stdout": "parser tests passed", "stderr": ""}),
    ));
    app.hook(
        &json!({"hook_event_name": "PostToolUseFailure", "session_id": "f2", "cwd": cwd,
        "transcript_path": "/tmp/t.jsonl", "tool_name": "Bash", "tool_use_id": "t3",
        "tool_input": {"command": "cargo build"}, "error": "parser.rs: expected one of `,` or `}`"})
        .to_string()
        .into_bytes(),
    );
    app.wait_indexed(4).await;
    let all = search(&app, query("parser", cwd)).await;
    assert_eq!(all.hits.len(), 4, "{:?}", titles(&all));

    let kinds = |reply: &SearchReply| {
        let mut k: Vec<String> = reply.hits.iter().map(|h| h.kind.clone()).collect();
        k.sort();
        k
    };
    let errors = search(
        &app,
        SearchRequest {
            kinds: vec!["error".into()],
            ..query("parser", cwd)
        },
    )
    .await;
    assert_eq!(kinds(&errors), ["error"]);
    let in_f1 = search(
        &app,
        SearchRequest {
            sessions: vec!["f1".into()],
            ..query("parser", cwd)
        },
    )
    .await;
    assert!(in_f1.hits.iter().all(|h| h.session_id == "f1") && in_f1.hits.len() == 2);
    let not_f1 = search(
        &app,
        SearchRequest {
            exclude_sessions: vec!["f1".into()],
            ..query("parser", cwd)
        },
    )
    .await;
    assert!(not_f1.hits.iter().all(|h| h.session_id == "f2") && not_f1.hits.len() == 2);
    let by_file = search(
        &app,
        SearchRequest {
            file: "src/parser.rs".into(),
            ..query("parser", cwd)
        },
    )
    .await;
    assert_eq!(kinds(&by_file), ["tool"]);
    let rust = search(
        &app,
        SearchRequest {
            concept: "rust".into(),
            ..query("parser", cwd)
        },
    )
    .await;
    assert_eq!(rust.hits.len(), 1, "{:?}", titles(&rust));
    let shell = search(
        &app,
        SearchRequest {
            concept: "shell".into(),
            ..query("parser", cwd)
        },
    )
    .await;
    assert_eq!(kinds(&shell), ["error", "tool"]);
    let now = common::time::now_ms();
    let future = search(
        &app,
        SearchRequest {
            since_ms: now + 60_000,
            ..query("parser", cwd)
        },
    )
    .await;
    assert!(future.hits.is_empty());
    let past = search(
        &app,
        SearchRequest {
            until_ms: now - 3_600_000,
            ..query("parser", cwd)
        },
    )
    .await;
    assert!(past.hits.is_empty());
    let recent = search(
        &app,
        SearchRequest {
            since_ms: now - 3_600_000,
            ..query("parser", cwd)
        },
    )
    .await;
    assert_eq!(recent.hits.len(), 4);

    // The same filters from the command line.
    let output = app.mneme(&[
        "search",
        "parser",
        "--project",
        cwd,
        "--kind",
        "error",
        "--json",
    ]);
    assert!(output.status.success(), "{output:?}");
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(cli["mode"], "hybrid");
    assert_eq!(cli["hits"].as_array().unwrap().len(), 1);
    assert_eq!(cli["hits"][0]["kind"], "error");
    let output = app.mneme(&["search", "parser", "--since", "tomorrow"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a date"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_and_get_round_trip() {
    let app = App::start().await;
    let cwd = "/work/timeline";
    let steps = [
        "step one: read the spec",
        "step two: sketch the schema",
        "step three: write the migration",
        "step four: run the tests",
        "step five: ship it",
    ];
    for step in steps {
        app.hook(&prompt("t1", cwd, step));
        // Distinct times, so the order is the order of events.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    app.hook(&prompt(
        "t2",
        cwd,
        "an unrelated session about the migration",
    ));
    app.wait_indexed(6).await;
    let hit = search(
        &app,
        SearchRequest {
            sessions: vec!["t1".into()],
            ..query("write the migration", cwd)
        },
    )
    .await
    .hits[0]
        .clone();
    assert_eq!(hit.title, steps[2]);

    let timeline: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_TIMELINE,
            &proto::TimelineRequest {
                id: hit.id,
                radius: 1,
            },
        )
        .await;
    assert!(timeline.error.is_empty());
    let around: Vec<&str> = timeline.items.iter().map(|i| i.title.as_str()).collect();
    assert_eq!(around, &steps[1..4]);
    assert_eq!(timeline.items[timeline.anchor as usize].id, hit.id);
    let wide: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_TIMELINE,
            &proto::TimelineRequest {
                id: hit.id,
                radius: 10,
            },
        )
        .await;
    assert_eq!(wide.items.len(), 5, "only the same session");

    let ids = vec![timeline.items[2].id, hit.id];
    let got: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_GET,
            &proto::GetRequest { ids: ids.clone() },
        )
        .await;
    assert_eq!(got.items.iter().map(|i| i.id).collect::<Vec<_>>(), ids);
    assert_eq!(got.items[1].text, steps[2]);
    assert_eq!(got.items[1].kind, "prompt");
    assert_eq!(got.items[1].source, "observation");
    let missing: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_TIMELINE,
            &proto::TimelineRequest {
                id: 999_999,
                radius: 1,
            },
        )
        .await;
    assert!(missing.error.contains("no memory item"));

    // The same three steps from the command line.
    let output = app.mneme(&["timeline", &hit.id.to_string(), "--radius", "1", "--json"]);
    assert!(output.status.success(), "{output:?}");
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(cli["items"].as_array().unwrap().len(), 3);
    let output = app.mneme(&["get", &hit.id.to_string(), "--json"]);
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(cli["items"][0]["text"], steps[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injection_respects_budgets_and_stays_silent_when_unrelated() {
    let app = App::start().await;
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    let cwd = project.path().to_str().unwrap().to_owned();
    // Many long prompts over several sessions: far more than any budget.
    for s in 0..4 {
        for p in 0..8 {
            let text = format!(
                "session {s} prompt {p}: investigate why the payment webhook retries {} times; {}",
                p + 2,
                "details ".repeat(60)
            );
            app.hook(&prompt(&format!("old{s}"), &cwd, &text));
        }
    }
    app.hook(&prompt(
        "old9",
        &cwd,
        "the kafka consumer lag alarm fires every night at 2am",
    ));
    app.wait_indexed(33).await;

    let ask = |moment: Moment, prompt: &str, budget: u32, max: u32| ContextRequest {
        moment: moment as i32,
        project: cwd.clone(),
        session_id: "current".into(),
        prompt: prompt.into(),
        budget_tokens: budget,
        max_chars: max,
        ..Default::default()
    };
    let default: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ask(Moment::SessionStart, "", 0, 0),
        )
        .await;
    assert!(!default.text.is_empty());
    assert!(
        default.text.chars().count() <= 2_000 * 4,
        "{}",
        default.text.len()
    );
    assert!(!default.item_ids.is_empty());
    // Every cited id is a real item.
    let got: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_GET,
            &proto::GetRequest {
                ids: default.item_ids.clone(),
            },
        )
        .await;
    assert_eq!(got.items.len(), default.item_ids.len());
    let small: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ask(Moment::SessionStart, "", 100, 0),
        )
        .await;
    assert!(
        small.text.chars().count() <= 400 && !small.text.is_empty(),
        "{}",
        small.text
    );
    let capped: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ask(Moment::SessionStart, "", 50_000, 10_000),
        )
        .await;
    assert!(capped.text.chars().count() <= 10_000);
    assert!(capped.text.chars().count() >= default.text.chars().count());

    let related: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ask(
                Moment::Prompt,
                "kafka consumer lag keeps alarming at night",
                0,
                0,
            ),
        )
        .await;
    assert!(
        related.text.contains("kafka consumer lag alarm"),
        "{}",
        related.text
    );
    let unrelated: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ask(
                Moment::Prompt,
                "how do I bake sourdough bread at high altitude?",
                0,
                0,
            ),
        )
        .await;
    assert!(unrelated.text.is_empty(), "{}", unrelated.text);
    // The current session's own items are never injected back.
    let own = ContextRequest {
        session_id: "old9".into(),
        ..ask(
            Moment::Prompt,
            "kafka consumer lag keeps alarming at night",
            0,
            0,
        )
    };
    let own: ContextReply = app.ask(subjects::RETRIEVAL_CONTEXT, &own).await;
    assert!(
        !own.text.contains("kafka consumer lag alarm"),
        "{}",
        own.text
    );

    // Through the hook: Claude Code's 10,000-character cap holds.
    let (output, _) = app.hook(
        &json!({"hook_event_name": "SessionStart", "session_id": "new", "cwd": cwd,
        "transcript_path": "/tmp/t.jsonl", "source": "startup"})
        .to_string()
        .into_bytes(),
    );
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = out["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(text.chars().count() <= 10_000 && text.starts_with("<mneme-memory>\n# mneme"));
    // And the CLI shows exactly the same text.
    let output = app.mneme(&["context", "--project", &cwd, "--session", "new", "--json"]);
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(cli["text"].as_str().unwrap().trim_end(), text.trim_end());
    let output = app.mneme(&[
        "context",
        "--project",
        &cwd,
        "--prompt",
        "sourdough at altitude",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "(nothing would be injected)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_retrieval_runs_full_text_and_says_so() {
    let mut app = App::bare();
    app.start_services_with(retrieval::RetrievalArgs {
        embed: retrieval::models::Backend::Local,
        embed_model_dir: Some(tempfile::tempdir().unwrap().path().to_owned()),
        ..Default::default()
    })
    .await;
    app.hook(&prompt(
        "n1",
        "/work/nomodel",
        "tune the connection pool size",
    ));
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM memory_items",
            1,
            Duration::from_secs(30)
        )
        .await,
        1
    );
    let reply = search(&app, query("connection pool", "/work/nomodel")).await;
    assert_eq!(reply.mode, "fts");
    assert_eq!(reply.hits[0].title, "tune the connection pool size");
    let output = app.mneme(&["status", "--json"]);
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    let detail = status["services"]["retrieval"]["detail"].as_str().unwrap();
    assert!(detail.starts_with("full-text only"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_models_reindexes_in_the_background_and_embeds_each_text_once() {
    let mut app = App::start().await;
    let cwd = "/work/models";
    // The same text in two sessions (within one session ingest would keep it once).
    for (session, text) in [
        ("m1", "cache the compiled templates"),
        ("m0", "cache the compiled templates"),
        ("m1", "profile the slow startup"),
    ] {
        app.hook(&prompt(session, cwd, text));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    app.wait_indexed(3).await;
    // The same text twice is embedded once.
    assert_eq!(app.count("SELECT count(*) FROM embedding_cache").await, 2);
    let first: Vec<(String, String)> =
        sqlx::query_as("SELECT model, table_name FROM vector_spaces")
            .fetch_all(app.store().await.pool())
            .await
            .unwrap();
    assert_eq!(first.len(), 1);
    assert!(
        first[0].0.starts_with("local/all-minilm-l6-v2@"),
        "{first:?}"
    );

    // Switch to an OpenAI-compatible endpoint: a new space fills up, the old one goes.
    app.stop_services().await;
    let embedded = Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = crate::harness::embeddings_server(embedded.clone()).await;
    app.start_services_with(retrieval::RetrievalArgs {
        embed: retrieval::models::Backend::Openai,
        embed_url: url,
        embed_model: "hash-16".into(),
        ..retrieval_args()
    })
    .await;
    app.hook(&prompt("m2", cwd, "profile the slow startup again"));
    app.wait_indexed(4).await;
    let one_space = crate::harness::wait_until(Duration::from_secs(30), || async {
        app.count("SELECT count(*) FROM vector_spaces").await == 1
    })
    .await;
    assert!(one_space.is_ok(), "the old space was not dropped");
    let spaces: Vec<(String, String)> =
        sqlx::query_as("SELECT model, table_name FROM vector_spaces")
            .fetch_all(app.store().await.pool())
            .await
            .unwrap();
    assert!(
        spaces[0].0.starts_with("openai/hash-16@127.0.0.1/16"),
        "{spaces:?}"
    );
    let old_table = app
        .count(&format!(
            "SELECT count(*) FROM sqlite_master WHERE name = '{}'",
            first[0].1
        ))
        .await;
    assert_eq!(
        old_table, 0,
        "the old model's vectors are dropped once the new space caught up"
    );
    // Every item text was embedded once, even the one stored twice.
    assert_eq!(
        app.count("SELECT count(*) FROM embedding_cache WHERE model LIKE 'openai/%'")
            .await,
        3
    );
    let texts = embedded.lock().unwrap().clone();
    assert_eq!(
        texts
            .iter()
            .filter(|t| *t == "cache the compiled templates")
            .count(),
        1,
        "{texts:?}"
    );
    let reply = search(&app, query("slow startup profile", cwd)).await;
    assert_eq!(reply.mode, "hybrid");
    assert!(reply.hits[0].title.starts_with("profile the slow startup"));
    // Cached vectors of the first model are kept, so switching back costs nothing.
    assert_eq!(
        app.count("SELECT count(*) FROM embedding_cache WHERE model LIKE 'local/%'")
            .await,
        2
    );
}

fn hook_event(session: &str, cwd: &str, name: &str, extra: Value) -> Vec<u8> {
    let mut event = json!({"hook_event_name": name, "session_id": session, "cwd": cwd,
        "transcript_path": "/tmp/t.jsonl"});
    for (key, value) in extra.as_object().unwrap() {
        event[key] = value.clone();
    }
    event.to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_compressor_and_pattern_service_write_is_searched_and_resumed_from() {
    let app = App::start().await;
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    let cwd = project.path().to_str().unwrap().to_owned();
    let file = format!("{cwd}/src/ledger.rs");
    // One session: a request, an edit, a failing and then passing test run, a compaction.
    app.hook(&prompt(
        "s1",
        &cwd,
        "make the ledger reconciliation idempotent",
    ));
    app.hook(&tool(
        "s1",
        &cwd,
        "t1",
        "Edit",
        json!({"file_path": file, "old_string": "apply(entry)", "new_string": "apply_once(entry)"}),
        json!({"filePath": file}),
    ));
    for (id, failed) in [("t2", true), ("t3", false)] {
        let name = if failed {
            "PostToolUseFailure"
        } else {
            "PostToolUse"
        };
        let mut extra = json!({"tool_name": "Bash", "tool_use_id": id,
            "tool_input": {"command": "cargo test ledger"}});
        if failed {
            extra["error"] = json!("test ledger::reconcile_twice ... FAILED: duplicate entry");
        } else {
            extra["tool_response"] = json!({"stdout": "test result: ok. 12 passed", "stderr": ""});
        }
        app.hook(&hook_event("s1", &cwd, name, extra));
    }
    app.hook(&hook_event(
        "s1",
        &cwd,
        "PreCompact",
        json!({"trigger": "auto", "custom_instructions": ""}),
    ));
    app.hook(&hook_event(
        "s1",
        &cwd,
        "PostCompact",
        json!({"trigger": "auto", "compact_summary": "Ledger reconciliation now applies each entry once; next: backfill the audit table."}),
    ));
    app.hook(&hook_event(
        "s1",
        &cwd,
        "SessionEnd",
        json!({"reason": "prompt_input_exit"}),
    ));

    // The compressor's checkpoint and summary become memory items of their own kinds.
    let store = app.store().await;
    let indexed = |kind: &'static str| {
        let pool = store.pool().clone();
        async move {
            let (n,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM memory_items WHERE kind = ? AND source = ?")
                    .bind(kind)
                    .bind(kind)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            n
        }
    };
    // The checkpoint is written at PreCompact and rewritten with the host's summary at
    // PostCompact; a rewrite is indexed as a new item, so wait for the final one.
    let completed = || {
        let pool = store.pool().clone();
        async move {
            let (n,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM memory_items
                 WHERE kind = 'checkpoint' AND text LIKE '%backfill the audit table%'",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            n
        }
    };
    crate::harness::wait_until(Duration::from_secs(30), || async {
        completed().await == 1 && indexed("checkpoint").await == 1 && indexed("summary").await >= 1
    })
    .await
    .expect("checkpoint and summary indexed");
    let summaries = search(
        &app,
        SearchRequest {
            kinds: vec!["summary".into()],
            ..query("ledger reconciliation", &cwd)
        },
    )
    .await;
    assert!(!summaries.hits.is_empty(), "no summary found");
    assert!(summaries.hits.iter().all(|h| h.kind == "summary"));

    // The next session of the project starts from the checkpoint.
    let start: ContextReply = app
        .ask(
            subjects::RETRIEVAL_CONTEXT,
            &ContextRequest {
                moment: Moment::SessionStart as i32,
                project: cwd.clone(),
                session_id: "s2".into(),
                ..Default::default()
            },
        )
        .await;
    assert!(start.text.contains("## Resume"), "{}", start.text);
    let cited: ItemsReply = app
        .ask(
            subjects::RETRIEVAL_GET,
            &proto::GetRequest {
                ids: start.item_ids.clone(),
            },
        )
        .await;
    assert_eq!(
        cited.items.first().map(|i| i.kind.as_str()),
        Some("checkpoint"),
        "the resume block comes first and is the checkpoint: {}",
        start.text
    );
    assert!(
        start.text.contains("backfill the audit table"),
        "{}",
        start.text
    );
}

/// The in-memory full-text index must rank as FTS5 does: same tokens (the Porter stemmer and
/// diacritics folding of `memory_fts`'s tokenizer) and the same BM25 scores, with filters and
/// after items are replaced, on real conversational text (the LoCoMo conversations and their
/// questions).
#[tokio::test]
async fn the_in_memory_full_text_index_scores_exactly_as_fts5() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::Store::open(&dir.path().join("mneme.db"))
        .await
        .unwrap();
    let pool = store.pool();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/locomo/locomo10.json");
    let data: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let lexical = retrieval::lexical::Lexical::new();
    let mut items = Vec::new();
    let mut questions = Vec::new();
    for (c, sample) in data.as_array().unwrap().iter().take(5).enumerate() {
        let conversation = sample["conversation"].as_object().unwrap();
        for n in 1.. {
            let Some(turns) = conversation.get(&format!("session_{n}")) else {
                break;
            };
            for turn in turns.as_array().unwrap() {
                let text = turn["text"].as_str().unwrap_or_default().to_owned();
                // Some stand alone, as summaries and patterns do: those are the items that are
                // ever replaced.
                let standalone = items.len() % 7 == 0;
                items.push(retrieval::index::NewItem {
                    source: if standalone { "standalone" } else { "locomo" },
                    source_id: items.len() as i64,
                    kind: if items.len() % 3 == 0 {
                        "prompt"
                    } else {
                        "reply"
                    }
                    .to_owned(),
                    session_id: format!("c{c}-s{n}"),
                    project: format!("/p/{c}"),
                    agent: "test".to_owned(),
                    author: turn["speaker"].as_str().unwrap_or_default().to_owned(),
                    tool_name: String::new(),
                    title: text.chars().take(40).collect(),
                    text,
                    files: Vec::new(),
                    concepts: Vec::new(),
                    occurred_at: 1_700_000_000_000 + items.len() as i64 * 3_600_000,
                    with_context: !standalone,
                });
            }
        }
        for qa in sample["qa"].as_array().unwrap() {
            questions.push(qa["question"].as_str().unwrap_or_default().to_owned());
        }
    }
    // Accents, other scripts and mixed case reach the tokenizer too.
    for (i, text) in [
        "Café naïve résumé: Ærøskøbing façade ÜBER Straße",
        "修复 websocket 重连 的测试",
        "CamelCaseIdentifiers and snake_case_names, v2.0.1-rc3",
    ]
    .into_iter()
    .enumerate()
    {
        items.push(retrieval::index::NewItem {
            source: "extra",
            source_id: i as i64,
            kind: "prompt".to_owned(),
            session_id: "extra".to_owned(),
            project: "/p/x".to_owned(),
            agent: "test".to_owned(),
            author: "dev".to_owned(),
            tool_name: String::new(),
            title: String::new(),
            text: text.to_owned(),
            files: Vec::new(),
            concepts: Vec::new(),
            occurred_at: 1_700_000_000_000,
            with_context: false,
        });
    }
    for chunk in items.chunks(500) {
        retrieval::index::write_items(pool, &lexical, chunk)
            .await
            .unwrap();
    }
    questions.extend(
        [
            "cafe naive",
            "resume facade uber",
            "websocket",
            "camelcaseidentifiers v2",
        ]
        .map(str::to_owned),
    );

    // Every word the store holds is stemmed as FTS5 stems it (temporary tables live on one
    // connection).
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query(
        "CREATE VIRTUAL TABLE temp.stem_check USING fts5(w,
             tokenize = 'porter unicode61 remove_diacritics 2')",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    let mut words: Vec<String> = items
        .iter()
        .flat_map(|i| {
            i.text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    words.sort();
    words.dedup();
    assert!(
        words.len() > 3_000,
        "too few distinct words: {}",
        words.len()
    );
    let mut mismatched = Vec::new();
    for chunk in words.chunks(500) {
        sqlx::query("DELETE FROM temp.stem_check")
            .execute(&mut *conn)
            .await
            .unwrap();
        for word in chunk {
            sqlx::query("INSERT INTO temp.stem_check (w) VALUES (?)")
                .bind(word)
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        sqlx::query(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_vocab
                 USING fts5vocab(temp, stem_check, instance)",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT doc, term FROM temp.stem_vocab ORDER BY doc, offset")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        let rowids: Vec<(i64,)> =
            sqlx::query_as("SELECT rowid FROM temp.stem_check ORDER BY rowid")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        for ((rowid,), word) in rowids.iter().zip(chunk) {
            let theirs: Vec<&str> = rows
                .iter()
                .filter(|(doc, _)| doc == rowid)
                .map(|(_, t)| t.as_str())
                .collect();
            let mut ours = Vec::new();
            retrieval::lexical::tokenize(word, |t| ours.push(t.to_owned()));
            if theirs != ours {
                mismatched.push(format!("{word}: fts5 {theirs:?}, ours {ours:?}"));
            }
        }
    }
    assert!(
        mismatched.is_empty(),
        "{} of {} words tokenised differently: {:?}",
        mismatched.len(),
        words.len(),
        &mismatched[..mismatched.len().min(20)]
    );

    drop(conn);
    lexical.set_ready();
    let weights = retrieval::search::Tuning::default().columns;
    let compare = async |lexical: &retrieval::lexical::Lexical,
                         label: &str,
                         project: Option<&str>| {
        let mut compared = 0;
        for question in &questions {
            let query = retrieval::text::query_terms(question).join(" ");
            let phrases = store::fts::phrases(&query);
            let Some(expression) = store::fts::match_query_any(&query) else {
                continue;
            };
            let filter = retrieval::vector::VectorFilter {
                project: project.map(str::to_owned),
                ..Default::default()
            };
            let Some(ours) = lexical.search(&phrases, &weights, &filter, 30) else {
                continue;
            };
            let join = if project.is_some() {
                "CROSS JOIN memory_items m ON m.id = memory_fts.rowid WHERE +m.project = ? AND"
            } else {
                "WHERE ? = '' AND"
            };
            let sql = format!(
                "SELECT memory_fts.rowid, bm25(memory_fts, ?, ?, ?, ?, ?) AS rank FROM memory_fts
                 {join} memory_fts MATCH ? ORDER BY rank, memory_fts.rowid LIMIT 30"
            );
            let mut q = sqlx::query_as::<_, (i64, f64)>(sqlx::AssertSqlSafe(sql));
            for w in weights {
                q = q.bind(w);
            }
            let theirs = q
                .bind(project.unwrap_or_default())
                .bind(&expression)
                .fetch_all(pool)
                .await
                .unwrap();
            assert_eq!(ours.len(), theirs.len(), "{label}: {question}");
            let (ours_all, theirs_all) = (&ours, &theirs);
            for (n, ((our_id, ours), (their_id, theirs))) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    (ours + theirs).abs() <= 1e-9 * theirs.abs().max(1.0),
                    "{label}: {question}: hit {n} scores {ours} here, {} in FTS5",
                    -theirs
                );
                // Equal scores may be summed to different last bits, so ties may come in
                // either order; anything else must be in the same place.
                let tied = |m: usize| {
                    theirs_all
                        .get(m)
                        .is_some_and(|(_, s)| (s - theirs).abs() <= 1e-9 * theirs.abs().max(1.0))
                };
                assert!(
                    our_id == their_id
                        || tied(n + 1)
                        || (n > 0 && tied(n - 1))
                        || n + 1 == ours_all.len(),
                    "{label}: {question}: hit {n} is #{our_id} here, #{their_id} in FTS5"
                );
            }
            compared += 1;
        }
        compared
    };
    let all = compare(&lexical, "unfiltered", None).await;
    assert!(all > 300, "only {all} questions compared");
    compare(&lexical, "one project", Some("/p/1")).await;

    // Replacing items changes the statistics (rows, lengths, document frequencies) in both.
    let replaced: Vec<retrieval::index::NewItem> = items
        .iter()
        .filter(|i| i.source == "standalone")
        .step_by(2)
        .map(|i| retrieval::index::NewItem {
            text: format!("{} (edited: nothing to do with it)", i.text),
            ..i.clone()
        })
        .collect();
    let (removed, written) = retrieval::index::replace_items(pool, &lexical, &replaced, &[])
        .await
        .unwrap();
    assert_eq!((removed.len(), written), (replaced.len(), replaced.len()));
    compare(&lexical, "after replacing", None).await;

    // A copy loaded from the store (as at a restart) scores as FTS5 too, rows FTS5 still
    // counts after their deletion included.
    let loaded = retrieval::lexical::Lexical::new();
    retrieval::index::load_lexical(pool, &loaded).await.unwrap();
    compare(&loaded, "loaded", None).await;
    store.close().await;
}

/// SQLite gives the largest rowid again once its row is deleted; memory item ids must never be
/// given twice (an id handed out before would name another item, and the embedding backlog,
/// which takes the items above how far it got, would skip the new one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_items_id_is_never_given_again() {
    let app = App::start_core().await;
    let prompt = |session: &str, text: &str| {
        json!({"hook_event_name": "UserPromptSubmit", "session_id": session,
            "cwd": "/work/ids", "prompt": text})
        .to_string()
        .into_bytes()
    };
    assert!(
        app.hook(&prompt("gone-1", "the first prompt, soon deleted"))
            .0
            .status
            .success()
    );
    app.wait_indexed(1).await;
    let newest = app.count("SELECT MAX(id) FROM memory_items").await;
    let reply = app.delete_sessions(&["gone-1"]).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    let gone = "SELECT 1 - count(*) FROM memory_items";
    assert_eq!(
        app.wait_for_count(gone, 1, Duration::from_secs(30)).await,
        1
    );
    assert!(
        app.hook(&prompt("kept-1", "a later prompt that stays"))
            .0
            .status
            .success()
    );
    app.wait_indexed(1).await;
    let next = app.count("SELECT MAX(id) FROM memory_items").await;
    assert!(next > newest, "the id {newest} was given again");
}

/// Retrieval's health reply: its detail and its backlogs by name.
async fn retrieval_health(
    app: &App,
) -> (String, std::collections::HashMap<String, proto::Backlog>) {
    let reply = app.health("retrieval").await;
    let backlogs = reply
        .backlogs
        .into_iter()
        .map(|b| (b.name.clone(), b))
        .collect();
    (reply.detail, backlogs)
}

/// A long backlog is searchable by meaning long before the model reaches it: static vectors
/// distilled from the same model fill in ahead of it, health says so, a paraphrase sharing no
/// word finds the last item while the model is still far behind, and deleting the session
/// drops the static vectors with the items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_vectors_fill_in_ahead_of_a_long_model_backlog() {
    use proto::Message as _;
    crate::harness::distil_static_table().await;
    let mut app = App::bare();
    app.start_services_core(retrieval::RetrievalArgs {
        static_after: 300,
        ..retrieval_args()
    })
    .await;
    let js = async_nats::jetstream::new(app.client().await);
    let project = "/work/backlog";
    let event = |n: usize, text: String| proto::Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: 1_760_000_000_000 + n as i64 * 1_000,
        agent: proto::Agent::ClaudeCode as i32,
        session_id: "imported".into(),
        project: project.into(),
        cwd: project.into(),
        host_event: "UserPromptSubmit".into(),
        payload: Some(proto::event::Payload::Prompt(proto::Prompt { text })),
        ..Default::default()
    };
    const ITEMS: usize = 1_200;
    const TARGET: &str =
        "the nightly snapshot of the postgres database failed because the disk was full";
    let mut acks = Vec::new();
    for n in 0..ITEMS - 1 {
        // Long enough that the model takes a while over each, as over real tool output.
        let text = format!(
            "rename the field {n} in the parser module and update test case {} accordingly; \
             the tokenizer keeps the old name in its lookup table, so regenerate the fixtures, \
             rerun the golden tests and check that the error messages still name the field \
             the way the documentation of release {} says they do",
            n * 7,
            n % 13
        );
        let event = event(n, text);
        acks.push(
            js.publish(event.subject(), event.encode_to_vec().into())
                .await
                .unwrap(),
        );
    }
    let last = event(ITEMS, TARGET.to_owned());
    acks.push(
        js.publish(last.subject(), last.encode_to_vec().into())
            .await
            .unwrap(),
    );
    for ack in acks {
        ack.await.unwrap();
    }
    let indexed = app
        .wait_for_count(
            "SELECT count(*) FROM memory_items",
            ITEMS as i64,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(indexed, ITEMS as i64);

    // Every item gets a vector of either kind well before the model could have embedded them.
    let covered = crate::harness::wait_until(Duration::from_secs(60), || async {
        let (_, backlogs) = retrieval_health(&app).await;
        backlogs
            .get("embedding")
            .is_some_and(|b| b.total == ITEMS as i64 && b.done == b.total)
    })
    .await;
    let (detail, backlogs) = retrieval_health(&app).await;
    assert!(covered.is_ok(), "{detail} {backlogs:?}");
    assert!(
        detail.contains("more by static vectors ahead of it"),
        "{detail}"
    );

    let request = SearchRequest {
        mode: "vector".into(),
        ..query("backup job ran out of storage space", project)
    };
    let reply = search(&app, request.clone()).await;
    let model_done = retrieval_health(&app).await.1["model"].done;
    assert!(
        model_done < ITEMS as i64 - 100,
        "the model reached {model_done} of {ITEMS}: this test needs it far behind"
    );
    let top: Vec<&str> = reply
        .hits
        .iter()
        .take(3)
        .map(|h| h.snippet.as_str())
        .collect();
    assert!(
        top.iter().any(|s| s.contains("nightly snapshot")),
        "the paraphrase did not find the last item: {top:?}"
    );
    let hit = reply
        .hits
        .iter()
        .find(|h| h.snippet.contains("nightly snapshot"))
        .unwrap();
    assert!(hit.found_by.contains(&"vector".to_owned()), "{hit:?}");

    // Deleting the session removes the items and their static vectors.
    let reply = app.delete_sessions(&["imported"]).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    let gone = app
        .wait_for_count(
            "SELECT 1 - min(count(*), 1) FROM memory_items",
            1,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(gone, 1, "the items were not forgotten");
    let emptied = crate::harness::wait_until(Duration::from_secs(10), || async {
        let (detail, backlogs) = retrieval_health(&app).await;
        !detail.contains("static vectors") && backlogs["embedding"].total == 0
    })
    .await;
    let (detail, _) = retrieval_health(&app).await;
    assert!(emptied.is_ok(), "{detail}");
    assert!(search(&app, request).await.hits.is_empty());
}

/// A long reply about page layout whose last paragraph, past what the model reads of a text,
/// holds the one fact about payment webhooks.
fn long_item_with_a_late_fact() -> String {
    let topics = [
        "the sidebar collapses below the header on narrow screens",
        "grid columns overflow when a card title is very long",
        "the footer floats above the content on short pages",
        "flexbox gaps differ between the two browsers we test",
        "the modal dialog scrolls the page behind it",
        "sticky table headers lose their shadow when scrolled",
    ];
    let mut text = String::new();
    for round in 0..6 {
        for topic in topics {
            text.push_str(&format!(
                "Layout note {round}: {topic}, so the stylesheet needs another rule. "
            ));
        }
        text.push_str("\n\n");
    }
    text.push_str(&format!("{LATE_FACT}\n"));
    text
}

const LATE_FACT: &str = "Separately: the payment webhook retries every failed delivery with \
    exponential backoff, six attempts over two hours, before it gives up.";

/// A fresh app embedding items in up to `pieces` pieces, holding one prompt for each of
/// `others` and `text` as the prompt of session `session`, all embedded.
async fn embedded_among(pieces: u16, cwd: &str, others: &[&str], session: &str, text: &str) -> App {
    let mut app = App::bare();
    app.start_services_core(retrieval::RetrievalArgs {
        embed_chunks: pieces,
        ..retrieval_args()
    })
    .await;
    for (n, other) in others.iter().enumerate() {
        let (output, _) = app.hook(&prompt(&format!("o{n}"), cwd, other));
        assert!(output.status.success());
    }
    assert!(app.hook(&prompt(session, cwd, text)).0.status.success());
    app.wait_indexed(others.len() as i64 + 1).await;
    app
}

/// The session of the item vector search puts first for `question`, or "" when none.
async fn nearest_session(app: &App, question: &str, cwd: &str) -> String {
    let reply = search(
        app,
        SearchRequest {
            mode: "vector".into(),
            limit: 1,
            ..query(question, cwd)
        },
    )
    .await;
    reply
        .hits
        .first()
        .map(|h| h.session_id.clone())
        .unwrap_or_default()
}

/// A preference said in passing, inside a message about something else, is found by a question
/// about it: the person's statement is embedded on its own. Embedded as one piece with the rest
/// of the message, as before, the same search misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preference_said_in_passing_is_found_by_meaning() {
    // A request about something else, with the preference said in passing near its end.
    let text = "The checkout integration test fails on CI about one run in five with a timeout \
        after thirty seconds, never on my machine. The retry loop in payments/client.rs waits \
        with a fixed backoff, and the sandbox gateway is slow in the mornings. Look at the \
        test's setup, the fixtures it loads and the order the mocks are registered in, and \
        tell me whether the timeout should be raised or the retries made exponential. \
        The logs of the last failing run are attached to the pipeline as an artifact. \
        btw I switched my editor to Helix last week. \
        Keep the change small, the release branch is cut on Thursday.";
    let question = "which text editor am I using these days";
    let mut found = Vec::new();
    // Near the question's subject, but nobody says what they use.
    let others = [
        "set up format on save in the editor config of the web app",
        "the syntax highlighting of the docs site is broken for toml",
        "add keyboard shortcuts to the dashboard",
        "translate the onboarding screens into german",
    ];
    let cwd = "/work/statements";
    for pieces in [4, 1] {
        let mut app = embedded_among(pieces, cwd, &others, "said", text).await;
        let statements: i64 = app
            .count("SELECT count(*) FROM embedding_cache WHERE text_hash LIKE '%~s%'")
            .await;
        assert_eq!(
            statements > 0,
            pieces > 1,
            "statements cached: {statements}"
        );
        found.push(nearest_session(&app, question, cwd).await == "said");
        app.stop_services().await;
    }
    assert_eq!(
        found,
        [true, false],
        "found by its statement, not by the whole message"
    );
}

/// A change noted without a subject ("Upgraded Node from 20 to 22 …") inside a message about
/// something else is found by a question about it: a sentence naming something specific is a
/// statement too, embedded on its own, though it has no I or we. The message fits one piece,
/// so without statements nothing else of it is embedded apart, and the same search misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_noted_without_a_subject_is_found_by_meaning() {
    let text = "The dashboard's session list loads slowly when a project has many sessions, and \
        the spinner stays up for several seconds before anything shows. Profile the query \
        behind it and the way the page renders the rows, and tell me whether an index or \
        pagination would help more. Upgraded Node from 20 to 22 across CI and the Dockerfile. \
        Keep the change small, the release branch is cut on Thursday.";
    let question = "what Node version do we use";
    // Near the question's subject, but none says which release.
    let others = [
        "npm install is slow on the build machines",
        "the frontend build prints deprecation warnings",
        "the javascript bundle grew past two megabytes",
        "translate the onboarding screens into german",
    ];
    let cwd = "/work/changes";
    let mut found = Vec::new();
    for pieces in [4, 1] {
        let mut app = embedded_among(pieces, cwd, &others, "noted", text).await;
        found.push(nearest_session(&app, question, cwd).await == "noted");
        app.stop_services().await;
    }
    assert_eq!(
        found,
        [true, false],
        "found by its statement, not by the whole message"
    );
}

/// The end of a long item is found by meaning: the item is embedded in pieces and ranks by
/// its nearest one. Embedded in one piece, as before, the same search misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_long_item_is_found_by_meaning() {
    let text = long_item_with_a_late_fact();
    assert!(text.len() > 3_000 && text.len() < 4_000, "{}", text.len());
    // Shares no word with the late paragraph: only meaning connects them.
    let question = "how many times does the billing callback try again";
    let mut found = Vec::new();
    let others = [
        "rename the user settings endpoint",
        "the build cache is invalidated on every commit",
        "translate the onboarding screens into german",
        "profile the search page, it feels slow",
    ];
    let cwd = "/work/pieces";
    let default_pieces = retrieval_args().embed_chunks;
    for pieces in [default_pieces, 1] {
        let mut app = embedded_among(pieces, cwd, &others, "long", &text).await;
        let pieces_held: i64 = app
            .count("SELECT count(*) FROM embedding_cache WHERE text_hash LIKE '%~%'")
            .await;
        assert_eq!(pieces_held > 0, pieces > 1, "pieces cached: {pieces_held}");
        found.push(nearest_session(&app, question, cwd).await == "long");
        // Hybrid search finds it too, by meaning alone, while pieces are on.
        if pieces > 1 {
            let reply = search(
                &app,
                SearchRequest {
                    limit: 1,
                    ..query(question, cwd)
                },
            )
            .await;
            let hit = reply.hits.first().expect("a hit");
            assert_eq!(hit.session_id, "long");
            assert_eq!(hit.found_by, ["vector"]);
            // Forgetting the item takes every piece's vector with it.
            let table: String = sqlx::query_scalar("SELECT table_name FROM vector_spaces")
                .fetch_one(app.store().await.pool())
                .await
                .unwrap();
            let vectors = format!("SELECT count(*) FROM {table}");
            assert!(app.count(&vectors).await > others.len() as i64 + 1);
            let reply = app.delete_sessions(&["long"]).await;
            assert!(reply.error.is_empty(), "{}", reply.error);
            let left = app
                .wait_for_count(&vectors, others.len() as i64, Duration::from_secs(10))
                .await;
            assert_eq!(left, others.len() as i64);
        }
        app.stop_services().await;
    }
    assert_eq!(found, [true, false], "found in pieces, then in one piece");
}

/// A tool's output is read in no more pieces than `MNEME_EMBED_TOOL_CHUNKS` allows, while a
/// prompt as long keeps every piece: the setting spares the model the tail of long outputs
/// without touching what a person or the assistant wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_output_is_read_in_the_pieces_its_setting_allows() {
    let text = long_item_with_a_late_fact();
    let cwd = "/work/tool-pieces";
    let pieces_of = |kind: &str| {
        format!(
            "SELECT count(*) FROM embedding_cache WHERE text_hash LIKE
               (SELECT text_hash FROM memory_items WHERE kind = '{kind}') || '~%'"
        )
    };
    let mut held = Vec::new();
    for tool_pieces in [retrieval_args().embed_tool_chunks, 2] {
        let mut app = App::bare();
        app.start_services_core(retrieval::RetrievalArgs {
            embed_tool_chunks: tool_pieces,
            ..retrieval_args()
        })
        .await;
        assert!(app.hook(&prompt("asked", cwd, &text)).0.status.success());
        let output = tool(
            "ran",
            cwd,
            "t1",
            "Bash",
            json!({"command": "make docs"}),
            json!({"stdout": format!("{text}\nmake: done"), "stderr": ""}),
        );
        assert!(app.hook(&output).0.status.success());
        app.wait_indexed(2).await;
        held.push((
            app.count(&pieces_of("prompt")).await,
            app.count(&pieces_of("tool")).await,
        ));
        app.stop_services().await;
    }
    let (prompt_all, tool_all) = held[0];
    let (prompt_capped, tool_capped) = held[1];
    // The output is long enough to fill every piece the default allows, and the prompt holding
    // the same text is read further.
    let default_extra = i64::from(retrieval_args().embed_tool_chunks) - 1;
    assert_eq!(tool_all, default_extra, "{held:?}");
    assert_eq!(tool_capped, 1, "one piece past the first: {held:?}");
    assert!(
        prompt_all > tool_all && prompt_capped == prompt_all,
        "{held:?}"
    );
}

/// A long answer about page layout with the one fact about payment webhooks deep inside it,
/// more than 4,000 characters in (past what four pieces are read of it), and layout again
/// after it.
fn long_answer_with_a_deep_fact() -> String {
    let layout = long_item_with_a_late_fact().replace(&format!("{LATE_FACT}\n"), "");
    format!("{layout}{}\n\n{LATE_FACT}\n\n{layout}", &layout[..1_000])
}

/// A fact deep inside a long answer of the assistant, past the 4,000 characters once indexed
/// of any item and past what four pieces of it are read, is found by its words, and by its
/// meaning with the pieces the service embeds by default (each starting where the model
/// stopped reading the one before); read in four pieces, vector search misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_deep_in_a_long_answer_is_found_by_its_words_and_its_meaning() {
    let text = long_answer_with_a_deep_fact();
    let at = text.find(LATE_FACT).unwrap();
    assert!(
        at > 4_500 && text.len() > at + 3_000,
        "{at} of {}",
        text.len()
    );
    let cwd = "/work/deep";
    let others = [
        "rename the user settings endpoint",
        "the build cache is invalidated on every commit",
        "translate the onboarding screens into german",
    ];
    let default_pieces = retrieval_args().embed_chunks;
    let mut found = Vec::new();
    for pieces in [default_pieces, 4] {
        let mut app =
            embedded_among(pieces, cwd, &others, "long", "why does the layout break?").await;
        let stop = json!({"hook_event_name": "Stop", "session_id": "long", "cwd": cwd,
            "transcript_path": "/tmp/t.jsonl", "last_assistant_message": text});
        assert!(app.hook(stop.to_string().as_bytes()).0.status.success());
        app.wait_indexed(others.len() as i64 + 2).await;
        // By its words, whatever the pieces: the whole answer is in the full-text index.
        let reply = search(
            &app,
            SearchRequest {
                mode: "fts".into(),
                ..query("payment webhook exponential backoff", cwd)
            },
        )
        .await;
        let hit = reply.hits.first().expect("a full-text hit");
        assert_eq!(hit.session_id, "long");
        assert!(hit.snippet.contains("webhook"), "{}", hit.snippet);
        found.push(
            nearest_session(
                &app,
                "how many times does the billing callback try again",
                cwd,
            )
            .await
                == "long",
        );
        app.stop_services().await;
    }
    assert_eq!(
        found,
        [true, false],
        "found with {default_pieces} pieces, then with 4"
    );
}

/// A question asking for several answers ("which tests have I quarantined?") brings more of
/// the sessions holding one to the top, though each says it in words of its own and in passing,
/// while other sessions share the question's words but not its meaning: search moves the
/// question's vector towards the answers it found first and looks again. The same search
/// without that step, run on the same store, puts fewer of them first; a question asking for
/// one thing is searched once, and both agree on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asking_for_several_answers_brings_more_of_them_first() {
    let answers = [
        (
            "refund",
            "Can you make the invoice PDF renderer stream its pages instead of building the \
             whole document in memory? Also, I quarantined test_refund_partial because it fails \
             randomly on CI.",
        ),
        (
            "export",
            "Next, please bump serde across the workspace and fix whatever breaks. I disabled \
             test_export_large_csv because it keeps failing at random on the CI runners.",
        ),
        // An exclamation without a first person is not a statement embedded on its own
        // (`index::statements`): the whole message is what the model reads of it.
        (
            "login",
            "The dashboard query for monthly revenue takes four seconds; look at its plan. By \
             the way, test_login_rate_limit is in the quarantine list now!",
        ),
    ];
    // Sessions sharing the question's words, not its meaning.
    let others = [
        "Which tests have the most assertions? List the ten largest test files.",
        "The quarantine period for new npm packages in our registry is seven days.",
        "Write tests for the new webhook signature check.",
        "Flaky wifi in the office again, so the video call dropped twice.",
        "Skip the docs build on pull requests that only touch tests.",
        "Rename the tests folder to spec to match the other repositories.",
        "The test suite takes twenty minutes now; which tests are the slowest?",
    ];
    let cwd = "/work/several";
    let app = App::start_core().await;
    for (n, other) in others.iter().enumerate() {
        assert!(
            app.hook(&prompt(&format!("other{n}"), cwd, other))
                .0
                .status
                .success()
        );
    }
    for (session, text) in answers {
        assert!(app.hook(&prompt(session, cwd, text)).0.status.success());
    }
    app.wait_indexed((others.len() + answers.len()) as i64)
        .await;

    let question = "Which tests have I quarantined as flaky?";
    // How many answers are among the first four sessions a search names.
    let answered = |hits: &[proto::SearchHit]| {
        let mut sessions: Vec<&str> = Vec::new();
        for hit in hits {
            if !sessions.contains(&hit.session_id.as_str()) {
                sessions.push(&hit.session_id);
            }
        }
        sessions.truncate(4);
        let found = answers
            .iter()
            .filter(|(session, _)| sessions.contains(session))
            .count();
        (found, format!("{sessions:?}"))
    };
    let reply = search(&app, query(question, cwd)).await;
    assert_eq!(reply.mode, "hybrid");
    let (with, first) = answered(&reply.hits);

    // The same store searched in this process without the second look.
    let without = app
        .searcher(retrieval::search::Tuning {
            feedback_weight: 0.0,
            ..Default::default()
        })
        .await;
    let (hits, mode) = without.search(&query(question, cwd)).await.unwrap();
    assert_eq!(mode, "hybrid");
    let (alone, once) = answered(&hits);
    assert!(
        with >= 2 && with > alone,
        "with feedback {first}, without {once}"
    );

    // A question asking for one thing is searched once, as before: both searches agree.
    let one = "Why are the payments tests flaky?";
    let reply = search(&app, query(one, cwd)).await;
    let (hits, _) = without.search(&query(one, cwd)).await.unwrap();
    let ids = |hits: &[proto::SearchHit]| hits.iter().map(|h| h.id).collect::<Vec<_>>();
    assert_eq!(ids(&reply.hits), ids(&hits));
}

/// In a question after what the assistant said, the verb that says so ("did you recommend")
/// names nothing the answer holds, and full text matching it finds every answer that
/// recommends anything; search leaves it out of full text, so the answer that holds what was
/// asked after comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_words_that_frame_a_question_are_not_matched() {
    let mut app = App::start().await;
    let cwd = "/work/framing";
    let turn = |session: &str, prompt: &str, answer: &str| {
        [
            json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": cwd,
                "transcript_path": "/tmp/t.jsonl", "prompt": prompt}),
            json!({"hook_event_name": "Stop", "session_id": session, "cwd": cwd,
                "transcript_path": "/tmp/t.jsonl", "last_assistant_message": answer}),
        ]
    };
    let events: Vec<Value> = [
        turn(
            "answered",
            "the api client gives up too early when the billing service is slow",
            "Rather than keeping our own backoff loop for the retries, pull in backon: it \
             handles jitter, a maximum number of attempts and which errors are worth another \
             try.",
        ),
        turn(
            "recommending",
            "should this refactor be split into two commits?",
            "I recommend two commits, as I recommended last time. I would recommend the \
             mechanical move first and the change of behaviour second, and I recommend \
             reviewing them one at a time.",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    for event in &events {
        assert!(app.hook(event.to_string().as_bytes()).0.status.success());
    }
    app.wait_indexed(4).await;
    let question = "Which library did you recommend for the retries?";
    let reply = search(
        &app,
        SearchRequest {
            limit: 4,
            ..query(question, cwd)
        },
    )
    .await;
    let framed = app
        .searcher(retrieval::search::Tuning {
            drop_framing: false,
            ..Default::default()
        })
        .await;
    let (hits, _) = framed
        .search(&SearchRequest {
            limit: 4,
            ..query(question, cwd)
        })
        .await
        .unwrap();
    let first = reply.hits.first().expect("a hit");
    assert_eq!(
        (first.session_id.as_str(), first.kind.as_str()),
        ("answered", "reply")
    );
    assert_eq!(
        hits.first().map(|h| h.session_id.as_str()),
        Some("recommending")
    );
    app.stop_services().await;
}

/// A question after what the assistant said ("which memory profiler did you recommend?") is
/// answered by the assistant's answer, though a prompt of another session asks the same thing
/// in the question's own words: the service lifts the assistant's answers for such a question.
/// Ranked without the lift, the prompt comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_after_what_the_assistant_said_finds_its_answer() {
    let mut app = App::start().await;
    let cwd = "/work/said";
    let events = [
        json!({"hook_event_name": "UserPromptSubmit", "session_id": "answered", "cwd": cwd,
            "transcript_path": "/tmp/t.jsonl",
            "prompt": "the api pods keep growing until the kernel kills them, can you look?"}),
        json!({"hook_event_name": "Stop", "session_id": "answered", "cwd": cwd,
            "transcript_path": "/tmp/t.jsonl",
            "last_assistant_message": "The growth is steady rather than spiky, which smells like \
                something kept forever. I'd take a profile with heaptrack: run the api under it \
                for ten minutes of normal traffic and look at which call sites keep their \
                allocations alive; it usually points at a cache that never evicts."}),
        json!({"hook_event_name": "UserPromptSubmit", "session_id": "asked", "cwd": cwd,
            "transcript_path": "/tmp/t.jsonl",
            "prompt": "Which memory profiler would you recommend for the api pods, memray or pprof?"}),
    ];
    for event in &events {
        assert!(app.hook(event.to_string().as_bytes()).0.status.success());
    }
    app.wait_indexed(3).await;
    let question = "Which memory profiler did you recommend?";
    let reply = search(
        &app,
        SearchRequest {
            limit: 3,
            ..query(question, cwd)
        },
    )
    .await;
    let first = reply.hits.first().expect("a hit");
    assert_eq!(
        (first.session_id.as_str(), first.kind.as_str()),
        ("answered", "reply")
    );
    let unlifted = app
        .searcher(retrieval::search::Tuning {
            assistant_boost: 1.0,
            ..Default::default()
        })
        .await;
    let (hits, _) = unlifted
        .search(&SearchRequest {
            limit: 3,
            ..query(question, cwd)
        })
        .await
        .unwrap();
    assert_eq!(hits.first().map(|h| h.session_id.as_str()), Some("asked"));
    app.stop_services().await;
}
