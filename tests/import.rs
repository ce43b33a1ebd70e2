//! `mneme import <host>` through the real binary into the real stack: the real Claude Code
//! transcripts import with counts that match an independent count of their records, a second
//! import stores nothing, a partial last line waits for the next import, a corrupt line is
//! reported with its file and line; Codex, Kimi and Gemini files written from their documented
//! formats import too; and an error fixed in Codex reaches a Kimi prompt in the same project.

use crate::harness::{App, retrieval_args, transcripts_dir};
use hosts::claude_code::transcript::claude_code_replay;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// `mneme import ARGS --json --no-wait`, which must succeed; its JSON summary.
pub(crate) fn import(app: &App, args: &[&str]) -> Value {
    let mut all = vec!["import"];
    all.extend_from_slice(args);
    // The tests look at what was published and wait for the store themselves; following the
    // embedding of a whole history would only make them slower.
    all.extend(["--json", "--no-wait"]);
    let output = app.mneme(&all);
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn write_lines(path: &Path, lines: &[Value]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

async fn kinds(app: &App, session: &str) -> BTreeMap<String, i64> {
    let store = app.store().await;
    sqlx::query_as::<_, (String, i64)>(
        "SELECT kind, count(*) FROM observations WHERE session_id = ? GROUP BY kind",
    )
    .bind(session)
    .fetch_all(store.pool())
    .await
    .unwrap()
    .into_iter()
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn real_claude_code_transcripts_import_once_with_the_counts_of_their_records() {
    let app = App::start_core().await;
    let dir = transcripts_dir();
    let summary = import(&app, &["claude-code", "--path", dir.to_str().unwrap()]);
    let mut replays = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        if entry.path().extension().is_some_and(|e| e == "jsonl") {
            replays.push(claude_code_replay(&entry.path()).unwrap());
        }
    }
    let total: usize = replays.iter().map(|r| r.payloads.len()).sum();
    assert_eq!(summary["files"], replays.len());
    assert_eq!(summary["events"], total);
    assert_eq!(summary["published"], total);
    assert_eq!(summary["bad_lines"].as_array().unwrap().len(), 0);
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            total as i64,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(stored, total as i64);
    let store = app.store().await;
    for replay in &replays {
        // `expected` is counted from the raw records, independently of the replayed payloads.
        let per_event: BTreeMap<String, usize> = sqlx::query_as::<_, (String, i64)>(
            "SELECT host_event, count(*) FROM observations WHERE session_id = ? GROUP BY host_event",
        )
        .bind(&replay.session_id)
        .fetch_all(store.pool())
        .await
        .unwrap()
        .into_iter()
        .map(|(k, n)| (k, n as usize))
        .collect();
        assert_eq!(
            per_event, replay.expected.per_event,
            "{}",
            replay.session_id
        );
        // Imported events carry the time of their records, not of the import.
        let (first,): (i64,) =
            sqlx::query_as("SELECT MIN(occurred_at) FROM observations WHERE session_id = ?")
                .bind(&replay.session_id)
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert!(first < 1_800_000_000_000, "{first}");
    }
    assert_eq!(app.count("SELECT count(*) FROM dead_letters").await, 0);

    let again = import(&app, &["claude-code", "--path", dir.to_str().unwrap()]);
    assert_eq!(again["published"], 0);
    assert_eq!(again["already_stored"], total);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM observations").await,
        total as i64
    );

    let sessions = app.mneme(&["sessions", "--agent", "claude-code", "--json"]);
    let sessions: Value = serde_json::from_slice(&sessions.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), replays.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partial_last_line_waits_and_a_corrupt_line_is_reported() {
    let app = App::start_core().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("-tmp-imp/imp-1.jsonl");
    let record = |uuid: &str, kind: &str, ts: &str, message: Value| json!({"type": kind, "uuid": uuid, "sessionId": "imp-1", "timestamp": ts, "cwd": "/tmp/imp", "message": message});
    write_lines(
        &file,
        &[
            record(
                "u1",
                "user",
                "2026-03-01T10:00:00.000Z",
                json!({"role":"user","content":"why does the importer stall?"}),
            ),
            record(
                "a1",
                "assistant",
                "2026-03-01T10:00:05.000Z",
                json!({"id":"msg_1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Because the reader waits for a newline."}]}),
            ),
        ],
    );
    let partial = record(
        "u2",
        "user",
        "2026-03-01T10:01:00.000Z",
        json!({"role":"user","content":"then leave the partial line"}),
    )
    .to_string();
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("this is not json\n");
    text.push_str(&partial);
    std::fs::write(&file, &text).unwrap();

    let first = import(
        &app,
        &["claude-code", "--path", dir.path().to_str().unwrap()],
    );
    assert_eq!(first["partial_files"], 1);
    let bad = &first["bad_lines"][0];
    assert_eq!(bad["line"], 3);
    assert!(bad["file"].as_str().unwrap().ends_with("imp-1.jsonl"));
    assert_eq!(first["published"], 4, "{first}");
    app.wait_for_count(
        "SELECT count(*) FROM observations",
        4,
        Duration::from_secs(20),
    )
    .await;

    // The line is finished: the next import takes it, and only it.
    std::fs::write(&file, format!("{text}\n")).unwrap();
    let second = import(
        &app,
        &["claude-code", "--path", dir.path().to_str().unwrap()],
    );
    assert_eq!(second["published"], 1, "{second}");
    assert_eq!(second["already_stored"], 4);
    app.wait_for_count(
        "SELECT count(*) FROM observations",
        5,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE kind = 'prompt'")
            .await,
        2
    );
}

/// An import larger than the events stream holds waits for ingest rather than outrunning it:
/// JetStream drops the oldest messages of a full stream whether or not ingest has stored them,
/// so an import publishing faster than ingest stores would lose the start of a long history.
#[tokio::test(flavor = "multi_thread")]
async fn an_import_larger_than_the_stream_waits_for_ingest_and_loses_nothing() {
    let mut app = App::bare();
    // The events stream made small before the services make theirs (they leave an existing
    // stream as it is), so a few megabytes stand for the gigabyte a real import fills.
    let jetstream = async_nats::jetstream::new(app.client().await);
    let mut config = common::streams::configs()
        .into_iter()
        .find(|c| c.name == proto::subjects::EVENTS_STREAM)
        .unwrap();
    config.max_bytes = 4 << 20;
    let stream = jetstream.create_stream(config).await.unwrap();
    // A consumer nobody reads, as a service that is not running leaves: the import must not
    // wait for it.
    stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("stopped".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    app.start_services_core(retrieval_args()).await;

    // 6,000 prompts of about 2 KB: some 13 MB of events, three times what the stream holds.
    let prompts = 6_000;
    let filler: String = (0..300).map(|w| format!("w{w} ")).collect();
    let lines: Vec<Value> = (0..prompts)
        .map(|i| {
            json!({"type": "user", "uuid": format!("u{i}"), "sessionId": "big-1",
                "timestamp": format!("2026-03-01T{:02}:{:02}:{:02}.000Z", i / 3600, i / 60 % 60, i % 60),
                "cwd": "/tmp/big", "message": {"role": "user", "content": format!("prompt {i}: {filler}")}})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    write_lines(&dir.path().join("-tmp-big/big-1.jsonl"), &lines);
    let summary = import(
        &app,
        &["claude-code", "--path", dir.path().to_str().unwrap()],
    );
    // The prompts, and the session's start and end the import adds around them.
    let published = summary["published"].as_i64().unwrap();
    assert_eq!(published, prompts as i64 + 2, "{summary}");
    assert!(
        summary["waited_seconds"].as_f64().unwrap() > 0.0,
        "the import never had to wait, so this test shows nothing: {summary}"
    );
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            published,
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(
        stored, published,
        "events were dropped before ingest stored them"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE kind = 'prompt'")
            .await,
        prompts as i64
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_kimi_gemini_and_kiro_session_files_import() {
    let app = App::start_core().await;
    let root = tempfile::tempdir().unwrap();
    let project = "/home/dev/shop";

    // Codex: `sessions/YYYY/MM/DD/rollout-*.jsonl`, `{timestamp, type, payload}` lines.
    let codex = root.path().join("codex/sessions/2026/08/21/rollout-2026-08-21T10-00-00-019d036d-c7fa-72d2-b6fd-78878bfe34e4.jsonl");
    let line = |ts: &str, kind: &str, payload: Value| json!({"timestamp": ts, "type": kind, "payload": payload});
    write_lines(
        &codex,
        &[
            line(
                "2026-08-21T10:00:00.000Z",
                "session_meta",
                json!({"id":"019d036d-c7fa-72d2-b6fd-78878bfe34e4","timestamp":"2026-08-21T10:00:00.000Z","cwd":project,"originator":"codex_cli_rs","cli_version":"0.150.0","instructions":"You are Codex"}),
            ),
            line(
                "2026-08-21T10:00:01.000Z",
                "turn_context",
                json!({"cwd":project,"approval_policy":"on-request","model":"gpt-5.5"}),
            ),
            line(
                "2026-08-21T10:00:02.000Z",
                "response_item",
                json!({"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]}),
            ),
            line(
                "2026-08-21T10:00:02.000Z",
                "event_msg",
                json!({"type":"user_message","message":"the nightly export fails","kind":"plain"}),
            ),
            line(
                "2026-08-21T10:00:03.000Z",
                "response_item",
                json!({"type":"reasoning","encrypted_content":"gAAAA"}),
            ),
            line(
                "2026-08-21T10:00:04.000Z",
                "response_item",
                json!({"type":"function_call","name":"shell","arguments":"{\"command\":[\"make\",\"export\"]}","call_id":"call_1"}),
            ),
            line(
                "2026-08-21T10:00:05.000Z",
                "response_item",
                json!({"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"export.py: KeyError: 'currency'\",\"metadata\":{\"exit_code\":2}}"}),
            ),
            line(
                "2026-08-21T10:00:06.000Z",
                "event_msg",
                json!({"type":"agent_message","message":"The export needs a default currency."}),
            ),
            line(
                "2026-08-21T10:00:07.000Z",
                "compacted",
                json!({"message":"Export fails on a missing currency key.","replacement_history":[]}),
            ),
        ],
    );
    let summary = import(
        &app,
        &[
            "codex",
            "--path",
            root.path().join("codex/sessions").to_str().unwrap(),
        ],
    );
    assert_eq!(summary["sessions"], 1, "{summary}");

    // Kimi: `session_index.jsonl` → `<sessionDir>/agents/main/wire.jsonl`.
    let kimi = root.path().join("kimi");
    let session_dir = kimi.join("sessions/wd_shop_0123456789ab/session-k1");
    write_lines(
        &kimi.join("session_index.jsonl"),
        &[
            json!({"sessionId":"k1","sessionDir":session_dir,"workDir":project}),
            json!({"sessionId":"k0","sessionDir":kimi.join("gone"),"workDir":project}),
            json!({"sessionId":"k0","deleted":true}),
        ],
    );
    write_lines(
        &session_dir.join("agents/main/wire.jsonl"),
        &[
            json!({"type":"metadata","protocol_version":"1.5","created_at":1779256800000_i64}),
            json!({"type":"turn.prompt","input":[{"type":"text","text":"why is signup slow"}],"origin":{"kind":"user"},"time":1779256800100_i64}),
            json!({"type":"context.append_loop_event","event":{"type":"content.part","uuid":"c1","turnId":"t1","step":0,"stepUuid":"s1","part":{"type":"text","text":"Signup hashes "}},"time":1779256800200_i64}),
            json!({"type":"context.append_loop_event","event":{"type":"content.part","uuid":"c2","turnId":"t1","step":0,"stepUuid":"s1","part":{"type":"text","text":"passwords twice."}},"time":1779256800300_i64}),
            json!({"type":"context.append_loop_event","event":{"type":"tool.call","toolCallId":"tc1","name":"Grep","args":{"pattern":"bcrypt"}},"time":1779256800400_i64}),
            json!({"type":"context.append_loop_event","event":{"type":"tool.result","toolCallId":"tc1","result":{"output":"signup.ts: bcrypt.hash(bcrypt.hash(pw))"}},"time":1779256800500_i64}),
            json!({"type":"turn.ended","turnId":"t1","reason":"completed","time":1779256800600_i64}),
        ],
    );
    let summary = import(&app, &["kimi", "--path", kimi.to_str().unwrap()]);
    assert_eq!(summary["sessions"], 1, "{summary}");

    // Gemini: metadata line, message records (a later one with the same id replaces it),
    // `$rewindTo` dropping what came after.
    let gemini = root
        .path()
        .join("gemini/tmp/shop/chats/session-2026-08-21T10-00-3f2e1d0c.jsonl");
    write_lines(
        &gemini,
        &[
            json!({"sessionId":"3f2e1d0c-9b8a-4765-8432-10fedcba9876","projectHash":"abc","startTime":"2026-08-21T10:00:00.000Z","lastUpdated":"2026-08-21T10:05:00.000Z","kind":"main","directories":[project]}),
            json!({"id":"m1","timestamp":"2026-08-21T10:00:01.000Z","type":"user","content":[{"text":"the invoice PDF has no logo"}]}),
            json!({"id":"m2","timestamp":"2026-08-21T10:00:02.000Z","type":"gemini","content":"Looking","toolCalls":[]}),
            json!({"id":"m2","timestamp":"2026-08-21T10:00:03.000Z","type":"gemini","content":"The logo path was relative.","toolCalls":[{"id":"tc-1","name":"read_file","args":{"absolute_path":"/home/dev/shop/invoice.tex"},"result":[{"text":"\\includegraphics{logo.png}"}],"status":"success","timestamp":"2026-08-21T10:00:02.500Z"}]}),
            json!({"id":"m3","timestamp":"2026-08-21T10:00:04.000Z","type":"user","content":"never mind"}),
            json!({"$rewindTo":"m2"}),
        ],
    );
    let summary = import(
        &app,
        &[
            "gemini",
            "--path",
            root.path().join("gemini/tmp").to_str().unwrap(),
        ],
    );
    assert_eq!(summary["sessions"], 1, "{summary}");

    // Kiro: `sessions/cli/<id>.jsonl` with `<id>.json` metadata.
    let kiro = root.path().join("kiro/sessions/cli");
    std::fs::create_dir_all(&kiro).unwrap();
    std::fs::write(kiro.join("c186a259.json"), json!({"session_id":"c186a259","cwd":project,"created_at":"2026-08-21T10:00:00Z","title":"repro"}).to_string()).unwrap();
    write_lines(
        &kiro.join("c186a259.jsonl"),
        &[
            json!({"version":"v1","kind":"Prompt","data":{"message_id":"p1","content":[{"kind":"text","data":"run the repro"}],"meta":{"timestamp":1779256800}}}),
            json!({"version":"v1","kind":"AssistantMessage","data":{"message_id":"a1","content":[{"kind":"text","data":"Running it."},{"kind":"toolUse","data":{"toolUseId":"tu1","name":"shell","input":{"command":"echo repro"}}}]}}),
            json!({"version":"v1","kind":"ToolResults","data":{"message_id":"r1","content":[{"kind":"toolResult","data":{"toolUseId":"tu1","content":[{"text":"repro"}],"status":"success"}}]}}),
        ],
    );
    let summary = import(&app, &["kiro", "--path", kiro.to_str().unwrap()]);
    assert_eq!(summary["sessions"], 1, "{summary}");

    app.wait_for_count(
        "SELECT count(*) FROM observations",
        22,
        Duration::from_secs(20),
    )
    .await;
    let expect = |pairs: &[(&str, i64)]| -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    assert_eq!(
        kinds(&app, "019d036d-c7fa-72d2-b6fd-78878bfe34e4").await,
        expect(&[
            ("session_start", 1),
            ("prompt", 1),
            ("pre_tool", 1),
            ("tool_failure", 1),
            ("pre_compact", 1),
            ("post_compact", 1),
            ("stop", 1)
        ])
    );
    assert_eq!(
        kinds(&app, "k1").await,
        expect(&[
            ("session_start", 1),
            ("prompt", 1),
            ("pre_tool", 1),
            ("post_tool", 1),
            ("stop", 1)
        ])
    );
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE session_id = 'k1' AND kind = 'stop' AND body LIKE '%Signup hashes passwords twice.%'").await,
        1,
        "streamed parts are reassembled"
    );
    assert_eq!(
        kinds(&app, "3f2e1d0c-9b8a-4765-8432-10fedcba9876").await,
        expect(&[
            ("session_start", 1),
            ("prompt", 1),
            ("pre_tool", 1),
            ("post_tool", 1),
            ("stop", 1)
        ])
    );
    assert_eq!(
        kinds(&app, "c186a259").await,
        expect(&[
            ("session_start", 1),
            ("prompt", 1),
            ("pre_tool", 1),
            ("post_tool", 1),
            ("stop", 1)
        ])
    );
    assert_eq!(
        app.count("SELECT count(DISTINCT project) FROM observations")
            .await,
        1,
        "every host's session lands in the one project"
    );
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE body LIKE '%environment_context%' OR body LIKE '%never mind%'").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_error_fixed_in_codex_reaches_a_kimi_prompt_in_the_same_project() {
    let app = App::start().await;
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    let cwd = project.path().to_str().unwrap().to_owned();
    let codex = |event: &str, extra: Value| {
        let mut p = json!({"session_id":"cx-1","turn_id":"t1","transcript_path":null,"cwd":cwd,
            "hook_event_name":event,"model":"gpt-5.5","permission_mode":"default"});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let steps = [
        codex("SessionStart", json!({"source":"startup"})),
        codex(
            "UserPromptSubmit",
            json!({"prompt":"sqlx migrate run fails with duplicate column name email"}),
        ),
        codex(
            "PostToolUse",
            json!({"tool_name":"Bash","tool_use_id":"c1","tool_input":{"command":"sqlx migrate run"},
            "tool_response":{"exit_code":1,"stderr":"error: duplicate column name: email","is_error":true}}),
        ),
        codex(
            "PostToolUse",
            json!({"tool_name":"apply_patch","tool_use_id":"c2","tool_input":{"file_path":"migrations/0007_email.sql",
            "patch":"-ALTER TABLE users ADD COLUMN email TEXT;\n+ALTER TABLE users ADD COLUMN IF NOT EXISTS email TEXT;"},
            "tool_response":{"success":true}}),
        ),
        codex(
            "PostToolUse",
            json!({"tool_name":"Bash","tool_use_id":"c3","tool_input":{"command":"sqlx migrate run"},
            "tool_response":{"exit_code":0,"stdout":"Applied 7/migrate email"}}),
        ),
        codex(
            "Stop",
            json!({"stop_hook_active":false,"last_assistant_message":"Fixed the duplicate column email error: the migration now uses ADD COLUMN IF NOT EXISTS."}),
        ),
        codex("SessionEnd", json!({"reason":"exit"})),
    ];
    for step in &steps {
        let (output, _) = app.hook_as("codex", step.to_string().as_bytes(), &[]);
        assert!(output.status.success());
    }
    app.wait_for_count(
        "SELECT count(*) FROM observations WHERE agent = 'codex'",
        steps.len() as i64,
        Duration::from_secs(20),
    )
    .await;
    app.wait_indexed(4).await;

    let prompt = json!({"hook_event_name":"UserPromptSubmit","session_id":"km-1","cwd":cwd,
        "client_type":"kimi_code_cli",
        "prompt":[{"type":"text","text":"sqlx migrate run says duplicate column name email again"}]});
    let mut context = String::new();
    // The summary and patterns are written moments after the session ends. Every attempt is
    // the same Kimi session, so the prompts of earlier attempts are left out of its context
    // as the current session's own: from other sessions they would be memory too, and
    // enough of them crowd the fix out of the few hits a prompt gets.
    for _ in 0..40 {
        let (output, _) = app.hook_as("kimi", prompt.to_string().as_bytes(), &[]);
        assert!(output.status.success());
        context = String::from_utf8(output.stdout).unwrap();
        if context.contains("IF NOT EXISTS") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        !context.trim_start().starts_with('{'),
        "kimi gets plain text: {context}"
    );
    assert!(context.contains("duplicate column"), "{context}");
    assert!(
        context.contains("IF NOT EXISTS"),
        "the fix is in the context: {context}"
    );
}

// --- `mneme import claude-mem` -------------------------------------------------------------

/// claude-mem's tables as its `SessionStore` leaves a database today (claude-mem v13.15,
/// src/services/sqlite/SessionStore.ts and SessionSearch.ts): each table as the last migration
/// that rebuilt it creates it (33 for `sdk_sessions`, 21 for `observations` and
/// `session_summaries`, 34 for `user_prompts`), then the columns later migrations add, and the
/// full-text table its search keeps in step with `observations`.
const CLAUDE_MEM_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS schema_versions (
  id INTEGER PRIMARY KEY,
  version INTEGER UNIQUE NOT NULL,
  applied_at TEXT NOT NULL
);
CREATE TABLE sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  content_session_id TEXT NOT NULL,
  memory_session_id TEXT UNIQUE,
  project TEXT NOT NULL,
  platform_source TEXT NOT NULL DEFAULT 'claude',
  user_prompt TEXT,
  started_at TEXT NOT NULL,
  started_at_epoch INTEGER NOT NULL,
  completed_at TEXT,
  completed_at_epoch INTEGER,
  status TEXT NOT NULL DEFAULT 'active' CHECK(status IN ('active', 'completed', 'failed')),
  worker_port INTEGER,
  prompt_counter INTEGER DEFAULT 0,
  custom_title TEXT
);
CREATE INDEX IF NOT EXISTS idx_sdk_sessions_claude_id ON sdk_sessions(content_session_id);
CREATE UNIQUE INDEX IF NOT EXISTS ux_sdk_sessions_platform_content ON sdk_sessions(platform_source, content_session_id);
CREATE TABLE observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_session_id TEXT NOT NULL,
  project TEXT NOT NULL,
  text TEXT,
  type TEXT NOT NULL,
  title TEXT,
  subtitle TEXT,
  facts TEXT,
  narrative TEXT,
  concepts TEXT,
  files_read TEXT,
  files_modified TEXT,
  prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id) ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX idx_observations_sdk_session ON observations(memory_session_id);
CREATE INDEX idx_observations_created ON observations(created_at_epoch DESC);
ALTER TABLE observations ADD COLUMN content_hash TEXT;
ALTER TABLE observations ADD COLUMN generated_by_model TEXT;
ALTER TABLE observations ADD COLUMN relevance_count INTEGER DEFAULT 0;
ALTER TABLE observations ADD COLUMN merged_into_project TEXT;
ALTER TABLE observations ADD COLUMN agent_type TEXT;
ALTER TABLE observations ADD COLUMN agent_id TEXT;
ALTER TABLE observations ADD COLUMN metadata TEXT;
ALTER TABLE observations ADD COLUMN synced_at INTEGER;
ALTER TABLE observations ADD COLUMN origin_device_id TEXT;
ALTER TABLE observations ADD COLUMN origin_local_id TEXT;
ALTER TABLE observations ADD COLUMN sync_rev TEXT NOT NULL DEFAULT '1';
CREATE TABLE session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_session_id TEXT NOT NULL,
  project TEXT NOT NULL,
  request TEXT,
  investigated TEXT,
  learned TEXT,
  completed TEXT,
  next_steps TEXT,
  files_read TEXT,
  files_edited TEXT,
  notes TEXT,
  prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id) ON DELETE CASCADE ON UPDATE CASCADE
);
ALTER TABLE session_summaries ADD COLUMN merged_into_project TEXT;
ALTER TABLE session_summaries ADD COLUMN synced_at INTEGER;
ALTER TABLE session_summaries ADD COLUMN origin_device_id TEXT;
ALTER TABLE session_summaries ADD COLUMN origin_local_id TEXT;
ALTER TABLE session_summaries ADD COLUMN sync_rev TEXT NOT NULL DEFAULT '1';
CREATE TABLE user_prompts (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_db_id INTEGER,
  content_session_id TEXT NOT NULL,
  prompt_number INTEGER NOT NULL,
  prompt_text TEXT NOT NULL,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(session_db_id) REFERENCES sdk_sessions(id) ON DELETE CASCADE
);
ALTER TABLE user_prompts ADD COLUMN synced_at INTEGER;
ALTER TABLE user_prompts ADD COLUMN origin_device_id TEXT;
ALTER TABLE user_prompts ADD COLUMN origin_local_id TEXT;
ALTER TABLE user_prompts ADD COLUMN sync_rev TEXT NOT NULL DEFAULT '1';
CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts USING fts5(
  title,
  subtitle,
  narrative,
  text,
  facts,
  concepts,
  content='observations',
  content_rowid='id'
);
CREATE TRIGGER IF NOT EXISTS observations_ai AFTER INSERT ON observations BEGIN
  INSERT INTO observations_fts(rowid, title, subtitle, narrative, text, facts, concepts)
  VALUES (new.id, new.title, new.subtitle, new.narrative, new.text, new.facts, new.concepts);
END;
INSERT INTO schema_versions (version, applied_at) VALUES (49, '2026-08-19T00:00:00.000Z');
"#;

/// claude-mem's tables as its migration 4 created them (October 2025, before migration 8 gave
/// observations titles, narratives and facts, migration 10 added `user_prompts` and migration
/// 17 renamed `claude_session_id` and `sdk_session_id`).
const CLAUDE_MEM_SCHEMA_V4: &str = r#"
CREATE TABLE schema_versions (
  id INTEGER PRIMARY KEY,
  version INTEGER UNIQUE NOT NULL,
  applied_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  claude_session_id TEXT UNIQUE NOT NULL,
  sdk_session_id TEXT UNIQUE,
  project TEXT NOT NULL,
  user_prompt TEXT,
  started_at TEXT NOT NULL,
  started_at_epoch INTEGER NOT NULL,
  completed_at TEXT,
  completed_at_epoch INTEGER,
  status TEXT CHECK(status IN ('active', 'completed', 'failed')) NOT NULL DEFAULT 'active'
);
CREATE TABLE IF NOT EXISTS observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  sdk_session_id TEXT NOT NULL,
  project TEXT NOT NULL,
  text TEXT NOT NULL,
  type TEXT NOT NULL CHECK(type IN ('decision', 'bugfix', 'feature', 'refactor', 'discovery')),
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(sdk_session_id) REFERENCES sdk_sessions(sdk_session_id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  sdk_session_id TEXT UNIQUE NOT NULL,
  project TEXT NOT NULL,
  request TEXT,
  investigated TEXT,
  learned TEXT,
  completed TEXT,
  next_steps TEXT,
  files_read TEXT,
  files_edited TEXT,
  notes TEXT,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(sdk_session_id) REFERENCES sdk_sessions(sdk_session_id) ON DELETE CASCADE
);
INSERT INTO schema_versions (version, applied_at) VALUES (4, '2025-10-19T00:00:00.000Z');
"#;

/// 2025-11-03T10:00:00Z, when the fixture's first session starts.
const CM_T0: i64 = 1_762_164_000_000;

/// A time as claude-mem writes `created_at` beside `created_at_epoch`.
fn cm_iso(ms: i64) -> String {
    format!("{}:00.000Z", common::time::utc_minute(ms).replace(' ', "T"))
}

/// A claude-mem database at `path` with `schema`, held open read-write in WAL mode as a
/// running claude-mem holds it (claude-mem's connection sets `journal_mode = WAL`).
async fn claude_mem_db(path: &Path, schema: &'static str) -> sqlx::SqliteConnection {
    use sqlx::Connection as _;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let mut db = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql(schema).execute(&mut db).await.unwrap();
    db
}

async fn cm_session(
    db: &mut sqlx::SqliteConnection,
    content: &str,
    memory: &str,
    project: &str,
    started: i64,
) -> i64 {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO sdk_sessions (content_session_id, memory_session_id, project, started_at,
             started_at_epoch, completed_at, completed_at_epoch, status, prompt_counter)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'completed', 1) RETURNING id",
    )
    .bind(content)
    .bind(memory)
    .bind(project)
    .bind(cm_iso(started))
    .bind(started)
    .bind(cm_iso(started + 3_600_000))
    .bind(started + 3_600_000)
    .fetch_one(&mut *db)
    .await
    .unwrap();
    id
}

/// One observation as claude-mem's SDK agent stores it: lists as JSON arrays.
struct CmObservation<'a> {
    kind: &'a str,
    title: &'a str,
    subtitle: &'a str,
    narrative: &'a str,
    facts: Value,
    concepts: Value,
    files_read: Value,
    files_modified: Value,
}

async fn cm_observation(
    db: &mut sqlx::SqliteConnection,
    memory: &str,
    project: &str,
    at: i64,
    o: CmObservation<'_>,
) -> i64 {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts,
             narrative, concepts, files_read, files_modified, prompt_number, created_at,
             created_at_epoch, content_hash, generated_by_model)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, 'claude-haiku-4-5') RETURNING id",
    )
    .bind(memory)
    .bind(project)
    .bind(o.kind)
    .bind(o.title)
    .bind(o.subtitle)
    .bind(o.facts.to_string())
    .bind(o.narrative)
    .bind(o.concepts.to_string())
    .bind(o.files_read.to_string())
    .bind(o.files_modified.to_string())
    .bind(cm_iso(at))
    .bind(at)
    .bind(format!("{at:x}"))
    .fetch_one(&mut *db)
    .await
    .unwrap();
    id
}

async fn cm_prompt(
    db: &mut sqlx::SqliteConnection,
    session: i64,
    content: &str,
    at: i64,
    text: &str,
) {
    sqlx::query(
        "INSERT INTO user_prompts (session_db_id, content_session_id, prompt_number, prompt_text,
             created_at, created_at_epoch)
         VALUES (?, ?, 1, ?, ?, ?)",
    )
    .bind(session)
    .bind(content)
    .bind(text)
    .bind(cm_iso(at))
    .bind(at)
    .execute(&mut *db)
    .await
    .unwrap();
}

/// A file's bytes and modification time: what must not change when it is only read.
fn file_state(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    let bytes = std::fs::read(path).unwrap();
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    (bytes, modified)
}

/// The raw bytes of every file of the mneme store, WAL included.
fn store_bytes(app: &App) -> String {
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        if let Ok(b) = std::fs::read(format!("{}{suffix}", app.db_path().display())) {
            bytes.extend(b);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn mneme_search(app: &App, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.push("--json");
    let output = app.mneme(&all);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found: Value = serde_json::from_slice(&output.stdout).unwrap();
    found["hits"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_claude_mem_database_imports_once_read_only_and_scrubbed() {
    use sqlx::Connection as _;
    let app = App::start_core().await;
    let secrets = sanitize_corpus::secrets();
    let secret = |name: &str| secrets.iter().find(|s| s.name == name).unwrap().clone();
    let (aws, github) = (secret("aws-access-key-id"), secret("github-classic-token"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude-mem.db");
    let mut db = claude_mem_db(&file, CLAUDE_MEM_SCHEMA).await;

    let web = cm_session(&mut db, "cc-web-1", "mem-web-1", "webapp", CM_T0).await;
    cm_prompt(
        &mut db,
        web,
        "cc-web-1",
        CM_T0 + 1_000,
        &format!(
            "The login form submits twice on a slow network; my token is in the shell: {}",
            github.text
        ),
    )
    .await;
    let bugfix_at = CM_T0 + 60_000;
    cm_observation(&mut db, "mem-web-1", "webapp", bugfix_at, CmObservation {
        kind: "bugfix",
        title: "Debounced the login form submit handler",
        subtitle: "Double submissions came from a missing pending state",
        narrative: &format!(
            "The submit button stayed enabled while the request was in flight, so a second click posted the form again. The deploy script printed {} while testing.",
            aws.text
        ),
        facts: json!(["handleSubmit now returns early while pending", "the button shows a spinner"]),
        concepts: json!(["problem-solution", "gotcha"]),
        files_read: json!(["src/api/session.ts"]),
        files_modified: json!(["src/components/LoginForm.tsx"]),
    })
    .await;
    cm_observation(
        &mut db,
        "mem-web-1",
        "webapp",
        CM_T0 + 120_000,
        CmObservation {
            kind: "security_note",
            title: "Session cookie lacked SameSite",
            subtitle: "",
            narrative: "The session cookie was sent without a SameSite attribute; set it to Lax.",
            facts: json!([]),
            concepts: json!(["gotcha"]),
            files_read: json!([]),
            files_modified: json!(["src/server/cookies.ts"]),
        },
    )
    .await;
    sqlx::query(
        "INSERT INTO session_summaries (memory_session_id, project, request, investigated,
             learned, completed, next_steps, files_read, files_edited, notes, prompt_number,
             created_at, created_at_epoch)
         VALUES ('mem-web-1', 'webapp', 'Fix the double login submission', 'LoginForm and the session API',
             'Pending state must disable the button', 'Debounced submit, SameSite cookie',
             'Add an end-to-end test for slow networks', '[\"src/api/session.ts\"]',
             '[\"src/components/LoginForm.tsx\"]', NULL, 1, ?, ?)",
    )
    .bind(cm_iso(CM_T0 + 3_000_000))
    .bind(CM_T0 + 3_000_000)
    .execute(&mut db)
    .await
    .unwrap();
    // claude-mem's own observer sessions are its model at work, not the user's.
    cm_session(
        &mut db,
        "cc-observer",
        "mem-observer",
        "observer-sessions",
        CM_T0,
    )
    .await;
    cm_observation(
        &mut db,
        "mem-observer",
        "observer-sessions",
        CM_T0 + 5_000,
        CmObservation {
            kind: "discovery",
            title: "Observer bookkeeping",
            subtitle: "",
            narrative: "The observer read the transcript.",
            facts: json!([]),
            concepts: json!([]),
            files_read: json!([]),
            files_modified: json!([]),
        },
    )
    .await;
    // Everything so far is checkpointed into the database file; what follows stays in the WAL,
    // as the last writes of a running claude-mem do.
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut db)
        .await
        .unwrap();
    sqlx::query("PRAGMA wal_autocheckpoint = 0")
        .execute(&mut db)
        .await
        .unwrap();
    let infra_at = CM_T0 + 86_400_000;
    cm_session(&mut db, "cc-infra-1", "mem-infra-1", "infra", infra_at).await;
    cm_observation(&mut db, "mem-infra-1", "infra", infra_at + 30_000, CmObservation {
        kind: "discovery",
        title: "Nightly backups run from a systemd timer in UTC",
        subtitle: "",
        narrative: "The backup job is a systemd timer firing at 02:00 UTC, not a cron entry; restores read from the s3 bucket named in backup.env.",
        facts: json!(["OnCalendar=*-*-* 02:00:00 UTC"]),
        concepts: json!(["how-it-works"]),
        files_read: json!(["deploy/backup.timer"]),
        files_modified: json!([]),
    })
    .await;

    let wal = dir.path().join("claude-mem.db-wal");
    let (before, before_wal) = (file_state(&file), file_state(&wal));
    let path = file.to_str().unwrap();
    let done = import(&app, &["claude-mem", "--path", path]);
    // Both projects' sessions, the observer's left out; rows only in the WAL included.
    assert_eq!(done["read"]["sessions"], 2, "{done}");
    assert_eq!(done["read"]["observations"], 3, "{done}");
    assert_eq!(done["read"]["summaries"], 1, "{done}");
    assert_eq!(done["read"]["prompts"], 1, "{done}");
    assert_eq!(done["read"]["left_out"], 1, "{done}");
    assert_eq!(
        (
            &done["sessions"],
            &done["observations"],
            &done["memory_items"],
            &done["skipped"]
        ),
        (&json!(2), &json!(5), &json!(5), &json!(0)),
        "{done}"
    );
    // Read-only: the file and claude-mem's WAL are as they were.
    assert!(file_state(&file) == before, "the database file changed");
    assert!(file_state(&wal) == before_wal, "claude-mem's WAL changed");

    let store = app.store().await;
    let sessions: Vec<(String, String, String, i64)> =
        sqlx::query_as("SELECT id, agent, project, started_at FROM sessions ORDER BY started_at")
            .fetch_all(store.pool())
            .await
            .unwrap();
    let sessions: Vec<(&str, &str, &str, i64)> = sessions
        .iter()
        .map(|(id, agent, project, at)| (id.as_str(), agent.as_str(), project.as_str(), *at))
        .collect();
    assert_eq!(
        sessions,
        [
            ("claude-mem:cc-web-1", "claude-code", "webapp", CM_T0),
            ("claude-mem:cc-infra-1", "claude-code", "infra", infra_at),
        ]
    );
    let items: Vec<(String, String, i64, i64, String)> = sqlx::query_as(
        "SELECT kind, project, occurred_at, seq, concepts FROM memory_items ORDER BY occurred_at",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    let kinds: Vec<(&str, i64)> = items.iter().map(|i| (i.0.as_str(), i.3)).collect();
    // In each session in claude-mem's order of time: the prompt, the observations, the summary.
    assert_eq!(
        kinds,
        [
            ("prompt", 1),
            ("bugfix", 2),
            ("discovery", 3),
            ("summary", 4),
            ("discovery", 1)
        ]
    );
    assert_eq!(items[1].2, bugfix_at);
    // A type mneme does not have is kept as a concept, so it is still found by it.
    assert!(
        items[2].4.lines().any(|c| c == "security_note"),
        "{:?}",
        items[2]
    );
    // Secrets were scrubbed before anything reached the store, and the row says so.
    let haystack = store_bytes(&app);
    for sample in [&aws, &github] {
        assert!(
            !haystack.contains(&sample.secret),
            "secret {} reached the store",
            sample.name
        );
    }
    let (redacted,): (i64,) = sqlx::query_as(
        "SELECT json_extract(meta, '$.secrets_redacted') FROM observations
         WHERE title = 'Debounced the login form submit handler'",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert!(redacted >= 1, "{redacted}");

    // `mneme search` finds an observation by what it says, with its project and its time.
    app.wait_indexed(5).await;
    let hits = mneme_search(&app, &["double click posted the form again"]);
    let hit = &hits[0];
    assert_eq!(
        (&hit["kind"], &hit["project"], &hit["occurred_at_ms"]),
        (&json!("bugfix"), &json!("webapp"), &json!(bugfix_at)),
        "{hits:?}"
    );
    let hits = mneme_search(&app, &["backup timer", "--project", "infra"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["session_id"], "claude-mem:cc-infra-1");

    // A second import adds nothing.
    let again = import(&app, &["claude-mem", "--path", path]);
    assert_eq!(
        (
            &again["sessions"],
            &again["observations"],
            &again["memory_items"],
            &again["skipped"]
        ),
        (&json!(0), &json!(0), &json!(0), &json!(12)),
        "{again}"
    );
    assert_eq!(app.count("SELECT count(*) FROM observations").await, 5);
    assert_eq!(app.count("SELECT count(*) FROM memory_items").await, 5);

    // claude-mem goes on: a new observation in a session already imported, and a new session.
    cm_observation(
        &mut db,
        "mem-web-1",
        "webapp",
        CM_T0 + 3_500_000,
        CmObservation {
            kind: "feature",
            title: "Added a slow-network end-to-end test",
            subtitle: "",
            narrative: "The test throttles the network to 3G and clicks submit twice.",
            facts: json!([]),
            concepts: json!([]),
            files_read: json!([]),
            files_modified: json!(["e2e/login.spec.ts"]),
        },
    )
    .await;
    let docs = cm_session(
        &mut db,
        "cc-docs-1",
        "mem-docs-1",
        "docs",
        CM_T0 + 2 * 86_400_000,
    )
    .await;
    cm_prompt(
        &mut db,
        docs,
        "cc-docs-1",
        CM_T0 + 2 * 86_400_000 + 500,
        "Write the upgrade guide",
    )
    .await;
    let grown = import(&app, &["claude-mem", "--path", path]);
    assert_eq!(
        (
            &grown["sessions"],
            &grown["observations"],
            &grown["memory_items"]
        ),
        (&json!(1), &json!(2), &json!(2)),
        "{grown}"
    );
    let (seq,): (i64,) = sqlx::query_as("SELECT seq FROM memory_items WHERE kind = 'feature'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        seq, 5,
        "a row claude-mem added later follows the ones imported before"
    );
    assert_eq!(app.count("SELECT count(*) FROM memory_items").await, 7);
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_claude_mem_database_imports_and_other_files_are_refused() {
    use sqlx::Connection as _;
    let app = App::start_core().await;
    let dir = tempfile::tempdir().unwrap();
    // A database from claude-mem's first schema, found through CLAUDE_MEM_DATA_DIR.
    let data = dir.path().join("cm-data");
    std::fs::create_dir_all(&data).unwrap();
    let mut db = claude_mem_db(&data.join("claude-mem.db"), CLAUDE_MEM_SCHEMA_V4).await;
    sqlx::query(
        "INSERT INTO sdk_sessions (claude_session_id, sdk_session_id, project, user_prompt,
             started_at, started_at_epoch, status)
         VALUES ('cc-old-1', 'sdk-old-1', 'legacy-api', 'Why is the rate limiter letting bursts through?', ?, ?, 'active')",
    )
    .bind(cm_iso(CM_T0))
    .bind(CM_T0)
    .execute(&mut db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO observations (sdk_session_id, project, text, type, created_at, created_at_epoch)
         VALUES ('sdk-old-1', 'legacy-api', 'The token bucket refilled per request instead of per second, so bursts passed the rate limiter.', 'bugfix', ?, ?)",
    )
    .bind(cm_iso(CM_T0 + 10_000))
    .bind(CM_T0 + 10_000)
    .execute(&mut db)
    .await
    .unwrap();
    db.close().await.unwrap();
    let run = |args: &[&str], env: &[(&str, &Path)]| {
        std::process::Command::new(crate::harness::binary("mneme"))
            .args(args)
            .envs(app.env())
            .env_remove("CLAUDE_MEM_DATA_DIR")
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
            .output()
            .unwrap()
    };
    let out = run(
        &["import", "claude-mem", "--json", "--no-wait"],
        &[("CLAUDE_MEM_DATA_DIR", &data)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            &done["read"]["observations"],
            &done["read"]["prompts"],
            &done["memory_items"]
        ),
        (&json!(1), &json!(1), &json!(2)),
        "{done}"
    );
    let hits = mneme_search(&app, &["token bucket bursts", "--kind", "bugfix"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (&hits[0]["project"], &hits[0]["session_id"]),
        (&json!("legacy-api"), &json!("claude-mem:cc-old-1"))
    );
    let hits = mneme_search(&app, &["rate limiter", "--concept", "claude-mem"]);
    assert_eq!(hits.len(), 2, "the prompt and the observation: {hits:?}");
    // The human summary, without --json.
    let out = run(
        &[
            "import",
            "claude-mem",
            "--no-wait",
            "--path",
            data.to_str().unwrap(),
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("0 memory items; 5 already here"),
        "{text}"
    );

    // What is not claude-mem's database is refused, saying which file and what it lacks.
    let refused = |args: &[&str], env: &[(&str, &Path)], wanted: &[&str]| {
        let out = run(args, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was imported");
        for w in wanted {
            assert!(stderr.contains(w), "{args:?}: {stderr}");
        }
    };
    let mneme_db = app.db_path();
    let mneme_db = mneme_db.to_str().unwrap();
    refused(
        &["import", "claude-mem", "--path", mneme_db],
        &[],
        &[
            mneme_db,
            "is not a claude-mem database",
            "no table sdk_sessions",
        ],
    );
    let text_file = dir.path().join("notes.db");
    std::fs::write(&text_file, "just some notes, not a database\n".repeat(200)).unwrap();
    let text_file = text_file.to_str().unwrap();
    refused(
        &["import", "claude-mem", "--path", text_file],
        &[],
        &[text_file, "not an SQLite database"],
    );
    let lacking = dir.path().join("lacking.db");
    let other = claude_mem_db(
        &lacking,
        "CREATE TABLE sdk_sessions (id INTEGER PRIMARY KEY, content_session_id TEXT, project TEXT, started_at_epoch INTEGER);
         CREATE TABLE observations (id INTEGER PRIMARY KEY, memory_session_id TEXT, project TEXT, type TEXT);",
    )
    .await;
    other.close().await.unwrap();
    let lacking = lacking.to_str().unwrap();
    refused(
        &["import", "claude-mem", "--path", lacking],
        &[],
        &[lacking, "no column observations.created_at_epoch"],
    );
    // Nothing at claude-mem's default place: the place is named.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    refused(
        &["import", "claude-mem"],
        &[("HOME", &home)],
        &[format!(
            "no claude-mem database at {}",
            home.join(".claude-mem/claude-mem.db").display()
        )
        .as_str()],
    );
    assert_eq!(app.count("SELECT count(*) FROM memory_items").await, 2);
}
