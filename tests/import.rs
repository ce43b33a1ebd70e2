//! `mneme import <host>` through the real binary into the real stack: the real Claude Code
//! transcripts import with counts that match an independent count of their records, a second
//! import stores nothing, a partial last line waits for the next import, a corrupt line is
//! reported with its file and line; Codex, Kimi and Gemini files written from their documented
//! formats import too; and an error fixed in Codex reaches a Kimi prompt in the same project.

use crate::harness::{App, transcripts_dir};
use hosts::claude_code::transcript::claude_code_replay;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn import(app: &App, args: &[&str]) -> Value {
    let mut all = vec!["import"];
    all.extend_from_slice(args);
    all.push("--json");
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
    // The summary and patterns are written moments after the session ends.
    for attempt in 0..40 {
        let session = format!("km-{attempt}");
        let mut prompt = prompt.clone();
        prompt["session_id"] = session.as_str().into();
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
