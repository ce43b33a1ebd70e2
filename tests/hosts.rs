//! Every host through the real `mneme-hook <host>` binary into the real stack: each fixture in
//! `tests/fixtures/hosts/<host>/` is stored with the right kind, session, project, tool and
//! text; the hook's stdout keeps each host's contract, with and without context; bad input
//! of every sort is bounded, dead-lettered and never printed as something a host could
//! misread; and Cursor running Claude Code's hooks stores one action once, under Cursor.

use crate::harness::{App, binary};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

const HOSTS: [&str; 6] = ["claude-code", "kimi", "codex", "cursor", "kiro", "gemini"];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hosts")
}

/// One row of a host's `expect.tsv`.
struct Case {
    file: PathBuf,
    kind: String,
    tool: String,
    text: String,
}

fn cases(host: &str) -> Vec<Case> {
    let dir = fixtures_dir().join(host);
    let table = std::fs::read_to_string(dir.join("expect.tsv")).unwrap();
    table
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let mut cols = line.split('\t').map(str::to_owned);
            let name = cols.next().unwrap();
            Case {
                file: dir.join(format!("{name}.json")),
                kind: cols.next().unwrap_or_default(),
                tool: cols.next().unwrap_or_default(),
                text: cols.next().unwrap_or_default(),
            }
        })
        .collect()
}

/// What the host must see on stdout when the hook has no context to give.
fn assert_silent_contract(host: &str, what: &str, output: &Output) {
    assert!(output.status.success(), "{host} {what}: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    match host {
        // Cursor wants JSON on every path; Gemini reads stdout as exactly one JSON object.
        "cursor" | "gemini" => assert_eq!(stdout.trim(), "{}", "{host} {what}"),
        _ => assert_eq!(stdout, "", "{host} {what}"),
    }
}

/// The host's stdout for one fixture: in the host's form, and context only where the host
/// can take it (session start and prompts; for Kimi prompts only, for Cursor session start only).
fn assert_contract(host: &str, case: &Case, host_event: &str, output: &Output) {
    let can_take = match host {
        "kimi" => case.kind == "prompt",
        "cursor" => case.kind == "session_start",
        _ => matches!(case.kind.as_str(), "session_start" | "prompt"),
    };
    if !can_take {
        return assert_silent_contract(host, &case.file.display().to_string(), output);
    }
    // Earlier fixtures are memory by now, so context may come; its form is checked either way.
    let _ = context_of(host, host_event, output);
}

fn sql_text(text: &str) -> String {
    text.replace('\'', "''")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_host_fixture_is_stored_as_its_kind_and_stdout_keeps_the_contract() {
    let app = App::start_core().await;
    let mut stored = 0;
    let mut dead = 0;
    for host in HOSTS {
        for case in cases(host) {
            let payload = std::fs::read(&case.file).unwrap();
            let (output, _) = app.hook_as(host, &payload, &[]);
            let host_event = serde_json::from_slice::<Value>(&payload).unwrap()["hook_event_name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert_contract(host, &case, &host_event, &output);
            if case.kind == "dead_letter" {
                dead += 1;
            } else {
                stored += 1;
            }
        }
    }
    assert_eq!(app.spooled(), 0, "nats is up: nothing may be spooled");
    let n = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            stored,
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        n, stored,
        "every fixture but the dead letters is stored once"
    );
    let letters = app
        .wait_for_count(
            "SELECT count(*) FROM dead_letters WHERE reason LIKE '%no session id%'",
            dead,
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(letters, dead);

    for host in HOSTS {
        for case in cases(host).into_iter().filter(|c| c.kind != "dead_letter") {
            let payload: Value =
                serde_json::from_slice(&std::fs::read(&case.file).unwrap()).unwrap();
            let host_event = payload["hook_event_name"].as_str().unwrap();
            let session = ["session_id", "conversation_id"]
                .iter()
                .find_map(|k| payload[k].as_str())
                .map(|s| format!("= '{}'", sql_text(s)))
                // Kiro outside its TUI sends no session id; the hook derives one.
                .unwrap_or_else(|| "LIKE 'kiro-%'".to_owned());
            let project = payload["cwd"]
                .as_str()
                .filter(|c| !c.is_empty())
                .or_else(|| payload["workspace_roots"][0].as_str())
                .unwrap();
            let sql = format!(
                "SELECT count(*) FROM observations WHERE agent = '{host}' AND host_event = '{}'
                 AND kind = '{}' AND session_id {session} AND project = '{}' AND tool_name = '{}'
                 AND (title || ' ' || body || ' ' || coalesce(input, '') || ' ' || coalesce(output, ''))
                     LIKE '%{}%'",
                sql_text(host_event),
                case.kind,
                sql_text(project),
                sql_text(&case.tool),
                sql_text(&case.text),
            );
            assert_eq!(
                app.count(&sql).await,
                1,
                "{host} {}: not stored as expected ({sql})",
                case.file.display()
            );
        }
    }
    // One Kiro run is one session, although no payload named it.
    assert_eq!(
        app.count("SELECT count(DISTINCT session_id) FROM observations WHERE agent = 'kiro' AND session_id LIKE 'kiro-%'")
            .await,
        1
    );
    // Unknown events keep everything the host said.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM observations WHERE agent = 'gemini' AND host_event = 'AfterModel'
             AND input LIKE '%usageMetadata%'"
        )
        .await,
        1
    );
}

/// The stdout of a hook run that had context to give, checked against the host's contract;
/// returns the context text the model would see, if any.
fn context_of(host: &str, host_event: &str, output: &Output) -> Option<String> {
    assert!(output.status.success(), "{host}: {output:?}");
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    match host {
        "claude-code" | "codex" => {
            if stdout.is_empty() {
                return None;
            }
            let value: Value = serde_json::from_str(&stdout).expect("one json object");
            assert_eq!(value.as_object().unwrap().len(), 1, "{stdout}");
            assert_eq!(value["hookSpecificOutput"]["hookEventName"], host_event);
            assert_eq!(value["hookSpecificOutput"].as_object().unwrap().len(), 2);
            value["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .map(str::to_owned)
        }
        "gemini" => {
            let value: Value = serde_json::from_str(&stdout).expect("exactly one json object");
            value["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .map(str::to_owned)
        }
        "cursor" => {
            let value: Value = serde_json::from_str(&stdout).expect("json on every path");
            value["additional_context"].as_str().map(str::to_owned)
        }
        // Kimi and Kiro inject stdout verbatim: plain text, never JSON.
        _ => {
            assert!(!stdout.trim_start().starts_with('{'), "{stdout}");
            (!stdout.trim().is_empty()).then_some(stdout)
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn context_reaches_each_host_in_its_own_form_and_only_where_it_can() {
    let app = App::start_core().await;
    let project = tempfile::tempdir().unwrap();
    let project = project.path().to_str().unwrap().to_owned();
    // Earlier work in the project, captured from Claude Code.
    let earlier = [
        serde_json::json!({"hook_event_name":"UserPromptSubmit","session_id":"earlier","cwd":project,
            "prompt":"the invoice export crashes on empty carts"}),
        serde_json::json!({"hook_event_name":"PostToolUse","session_id":"earlier","cwd":project,
            "tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"cargo test invoice_export"},
            "tool_response":{"stdout":"test invoice_export_empty_cart ... ok"}}),
        serde_json::json!({"hook_event_name":"SessionEnd","session_id":"earlier","cwd":project,"reason":"exit"}),
    ];
    for payload in &earlier {
        let (output, _) = app.hook_as("claude-code", payload.to_string().as_bytes(), &[]);
        assert!(output.status.success());
    }
    app.wait_indexed(2).await;

    // (host, session-start payload, prompt payload); each in a new session of the project.
    let cases = [
        (
            "claude-code",
            "SessionStart",
            "UserPromptSubmit",
            serde_json::json!({"session_id":"cc2","cwd":project}),
        ),
        (
            "codex",
            "SessionStart",
            "UserPromptSubmit",
            serde_json::json!({"session_id":"cx2","turn_id":"t","cwd":project,"model":"gpt-5.5"}),
        ),
        (
            "kimi",
            "SessionStart",
            "UserPromptSubmit",
            serde_json::json!({"session_id":"km2","cwd":project}),
        ),
        (
            "cursor",
            "sessionStart",
            "beforeSubmitPrompt",
            serde_json::json!({"conversation_id":"cu2","workspace_roots":[project]}),
        ),
        (
            "kiro",
            "agentSpawn",
            "userPromptSubmit",
            serde_json::json!({"session_id":"ki2","cwd":project}),
        ),
        (
            "gemini",
            "SessionStart",
            "BeforeAgent",
            serde_json::json!({"session_id":"ge2","cwd":project}),
        ),
    ];
    for (host, start_event, prompt_event, base) in cases {
        let mut start = base.clone();
        start["hook_event_name"] = start_event.into();
        let (output, _) = app.hook_as(host, start.to_string().as_bytes(), &[]);
        let start_context = context_of(host, start_event, &output);
        let mut prompt = base.clone();
        prompt["hook_event_name"] = prompt_event.into();
        prompt["prompt"] = if host == "kimi" {
            serde_json::json!([{"type":"text","text":"why did the invoice export crash on empty carts?"}])
        } else {
            "why did the invoice export crash on empty carts?".into()
        };
        let (output, _) = app.hook_as(host, prompt.to_string().as_bytes(), &[]);
        let prompt_context = context_of(host, prompt_event, &output);
        match host {
            // Kimi drops SessionStart output: its start context arrives with the first prompt.
            "kimi" => {
                assert_eq!(start_context, None);
                let text = prompt_context.expect("kimi's first prompt carries the start context");
                assert!(text.contains("invoice"), "{text}");
            }
            // Cursor has no per-prompt injection.
            "cursor" => {
                assert!(
                    start_context
                        .expect("cursor start context")
                        .contains("invoice")
                );
                assert_eq!(prompt_context, None);
            }
            _ => {
                let text = start_context.unwrap_or_else(|| panic!("{host}: no start context"));
                assert!(text.contains("invoice"), "{host}: {text}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_bounded_dead_lettered_and_never_misread() {
    let app = App::start_core().await;
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let huge = vec![b'x'; 50 * 1024 * 1024];
    let inputs: [(&str, &[u8], &str); 4] = [
        (
            "truncated json",
            br#"{"hook_event_name":"PostToolUse","session_id":"s","tool_inp"#,
            "not valid json",
        ),
        ("binary garbage", &garbage, "not valid utf-8"),
        ("50 MB on stdin", &huge, "larger than"),
        ("a json array", b"[1,2,3]", "not an object"),
    ];
    let mut expected = 0;
    for host in HOSTS {
        for (what, input, _) in &inputs {
            let (output, took) = app.hook_as(host, input, &[]);
            assert_silent_contract(host, what, &output);
            assert!(took < Duration::from_secs(5), "{host} {what} took {took:?}");
            expected += 1;
        }
    }
    // A payload meant for another host, or a host name nobody knows.
    let codex_payload = std::fs::read(fixtures_dir().join("codex/PostToolUse.json")).unwrap();
    let (output, _) = app.hook_as("vim", &codex_payload, &[]);
    assert_eq!(output.stdout, b"");
    assert!(output.status.success());
    expected += 1;
    let letters = app
        .wait_for_count(
            "SELECT count(*) FROM dead_letters",
            expected,
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(letters, expected);
    for (what, _, reason) in inputs {
        assert_eq!(
            app.count(&format!(
                "SELECT count(*) FROM dead_letters WHERE reason LIKE '%{reason}%'"
            ))
            .await,
            HOSTS.len() as i64,
            "{what}"
        );
    }
    assert_eq!(
        app.count("SELECT count(*) FROM dead_letters WHERE reason LIKE '%unknown host \"vim\"%'")
            .await,
        1
    );
    assert_eq!(app.count("SELECT count(*) FROM observations").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn cursor_running_claude_code_hooks_stores_one_action_once_under_cursor() {
    let app = App::start_core().await;
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("HOME", home.path().display().to_string()),
        ("CURSOR_VERSION", "3.1.15".to_owned()),
    ];
    let native = std::fs::read(fixtures_dir().join("cursor/postToolUse.json")).unwrap();

    // Without mneme's Cursor hooks, Cursor's run of the Claude Code hook is the only capture:
    // it is stored, under Cursor.
    let (output, _) = app.hook_as("claude-code", &native, &env);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "{}");
    app.wait_for_count(
        "SELECT count(*) FROM observations",
        1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM observations WHERE agent = 'cursor' AND kind = 'post_tool'"
        )
        .await,
        1
    );

    // With them installed, the native hook captures and the Claude Code run stores nothing.
    std::fs::create_dir_all(home.path().join(".cursor")).unwrap();
    std::fs::write(
        home.path().join(".cursor/hooks.json"),
        format!(
            "{{\"version\":1,\"hooks\":{{\"postToolUse\":[{{\"command\":\"{} cursor\"}}]}}}}\n",
            binary("mneme-hook").display()
        ),
    )
    .unwrap();
    let pre = std::fs::read(fixtures_dir().join("cursor/preToolUse.json")).unwrap();
    let (output, _) = app.hook_as("claude-code", &pre, &env);
    assert!(output.status.success());
    let (output, _) = app.hook_as("cursor", &pre, &env);
    assert!(output.status.success());
    app.wait_for_count(
        "SELECT count(*) FROM observations",
        2,
        Duration::from_secs(10),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE kind = 'pre_tool'")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE agent <> 'cursor'")
            .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_context_is_cut_to_each_hosts_cap() {
    // A budget far above every host's cap, so that the cap is what binds.
    let mut app = App::bare();
    app.start_services_core(retrieval::RetrievalArgs {
        context_tokens: 10_000,
        ..crate::harness::retrieval_args()
    })
    .await;
    let project = tempfile::tempdir().unwrap();
    let project = project.path().to_str().unwrap().to_owned();
    // Greek text takes two bytes a character, so a context that fits a cap counted in characters
    // overflows the hosts whose cap is counted in bytes (Codex, Kiro): the hook must cut it.
    let greek = |i: usize| {
        format!("σημείωση {i}: η εξαγωγή τιμολογίων αποτυγχάνει όταν το καλάθι είναι άδειο, ")
            .repeat(6)
    };
    let mut stored = 0;
    for session in 0..3 {
        let session_id = format!("earlier-{session}");
        for prompt in 0..8 {
            let payload = serde_json::json!({"hook_event_name":"UserPromptSubmit",
                "session_id":session_id,"cwd":project,"prompt":greek(session * 10 + prompt)});
            let (output, _) = app.hook_as("claude-code", payload.to_string().as_bytes(), &[]);
            assert!(output.status.success());
            stored += 1;
        }
    }
    let compact = serde_json::json!({"hook_event_name":"PostCompact","session_id":"earlier-2",
        "cwd":project,"trigger":"auto","compact_summary":greek(99).repeat(20)});
    let (output, _) = app.hook_as("claude-code", compact.to_string().as_bytes(), &[]);
    assert!(output.status.success());
    app.wait_indexed(stored + 1).await;

    // (host, the event that carries session-start context, base payload, cap, cap in bytes?)
    let cases = [
        (
            "claude-code",
            "SessionStart",
            serde_json::json!({"session_id":"n1","cwd":project}),
            10_000,
            false,
        ),
        (
            "codex",
            "SessionStart",
            serde_json::json!({"session_id":"n2","turn_id":"t","cwd":project,"model":"gpt-5.5"}),
            9_000,
            true,
        ),
        (
            "kimi",
            "UserPromptSubmit",
            serde_json::json!({"session_id":"n3","cwd":project,"prompt":[{"type":"text","text":"τιμολόγια"}]}),
            10_000,
            false,
        ),
        (
            "cursor",
            "sessionStart",
            serde_json::json!({"conversation_id":"n4","workspace_roots":[project]}),
            10_000,
            false,
        ),
        (
            "kiro",
            "agentSpawn",
            serde_json::json!({"session_id":"n5","cwd":project}),
            10_000,
            true,
        ),
        (
            "gemini",
            "SessionStart",
            serde_json::json!({"session_id":"n6","cwd":project}),
            10_000,
            false,
        ),
    ];
    for (host, event, mut payload, cap, in_bytes) in cases {
        payload["hook_event_name"] = event.into();
        let (output, _) = app.hook_as(host, payload.to_string().as_bytes(), &[]);
        let text = context_of(host, event, &output).unwrap_or_else(|| panic!("{host}: no context"));
        // Plain-text hosts get the context and one newline; the cap is on the context.
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let size = if in_bytes {
            text.len()
        } else {
            text.chars().count()
        };
        assert!(size <= cap, "{host}: {size} over its cap of {cap}");
        // Retrieval fills whole lines up to the cap, so a full context is over half of it; in
        // bytes, the Greek text is twice that, so the hook itself had to cut for Codex and Kiro.
        assert!(size > cap / 2, "{host}: only {size} of {cap}");
        assert!(text.contains("σημείωση"), "{host}: {text}");
    }
}
