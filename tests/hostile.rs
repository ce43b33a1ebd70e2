//! Hostile and sensitive input: malformed payloads become dead letters without stopping ingest;
//! secrets never reach the SQLite files.

use crate::harness::App;
use proto::Message as _;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_hostile_input_is_dead_lettered_and_ingest_keeps_going() {
    let app = App::start().await;
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"{\"hook_event_name\": \"PostToolUse\", ".to_vec(),
            "not valid json",
        ),
        (
            b"\xff\xfe{\"hook_event_name\":\"Stop\"}".to_vec(),
            "not valid utf-8",
        ),
        (deep.into_bytes(), "deeper than 128"),
        (b"[1, 2, 3]".to_vec(), "not an object"),
        (b"".to_vec(), "empty payload"),
        (b"{\"session_id\":\"s\"}".to_vec(), "no hook_event_name"),
    ];
    for (payload, _) in &cases {
        let (output, _) = app.hook(payload);
        assert!(
            output.status.success(),
            "hook must exit 0 on hostile input: {output:?}"
        );
        assert!(
            output.stdout.is_empty(),
            "hook printed something for hostile input"
        );
    }
    // Bytes that are not an event at all, published straight to the events subject.
    let client = app.client().await;
    let js = async_nats::jetstream::new(client.clone());
    js.publish(
        "mneme.events.claude-code.post_tool",
        b"\x08\x96\x01 garbage \xff".as_ref().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    // An event from a future schema.
    let future = proto::Event {
        schema_version: 99,
        id: proto::new_event_id(),
        session_id: "s".into(),
        payload: Some(proto::event::Payload::Stop(Default::default())),
        ..Default::default()
    };
    js.publish(future.subject(), future.encode_to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();

    let expected = cases.len() as i64 + 2;
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM dead_letters",
            expected,
            Duration::from_secs(30)
        )
        .await,
        expected
    );
    let store = app.store().await;
    let reasons: Vec<(String,)> = sqlx::query_as("SELECT reason FROM dead_letters ORDER BY id")
        .fetch_all(store.pool())
        .await
        .unwrap();
    for (_, reason) in &cases {
        assert!(
            reasons.iter().any(|(r,)| r.contains(reason)),
            "no dead letter says {reason:?}: {reasons:?}"
        );
    }
    assert!(
        reasons.iter().any(|(r,)| r.contains("not a mneme event")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(r,)| r.contains("unsupported schema version 99")),
        "{reasons:?}"
    );
    // The dead letters are also on their own stream for inspection.
    let mut dlq = js.get_stream(proto::subjects::DLQ_STREAM).await.unwrap();
    assert_eq!(dlq.info().await.unwrap().state.messages, expected as u64);

    // Ingest is still running: a huge payload and an unknown event type are stored normally.
    let huge = json!({"hook_event_name": "PostToolUse", "session_id": "big", "cwd": "/tmp", "tool_name": "Bash",
        "tool_use_id": "toolu_big", "tool_input": {"command": "cat big.log"},
        "tool_response": {"stdout": "0123456789\n".repeat(500_000)}});
    assert!(app.hook(huge.to_string().as_bytes()).0.status.success());
    let unknown = json!({"hook_event_name": "WorktreeCreate", "session_id": "big", "cwd": "/tmp", "name": "feature-x"});
    assert!(app.hook(unknown.to_string().as_bytes()).0.status.success());
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations WHERE session_id = 'big'",
            2,
            Duration::from_secs(30)
        )
        .await,
        2
    );
    let (output, meta): (String, String) =
        sqlx::query_as("SELECT output, meta FROM observations WHERE tool_use_id = 'toolu_big'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(output.len() < 120_000, "output kept {} bytes", output.len());
    assert!(output.contains("truncated"), "no truncation marker");
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert!(
        meta["truncated"]["original_lines"].as_u64().unwrap() > 0,
        "{meta}"
    );
    let (kind, body): (String, String) =
        sqlx::query_as("SELECT kind, body FROM observations WHERE host_event = 'WorktreeCreate'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(kind, "other");
    assert!(body.contains("feature-x"));
    assert_eq!(
        app.count("SELECT count(*) FROM dead_letters").await,
        expected,
        "redelivery must not count a dead letter twice"
    );
    let status: serde_json::Value =
        serde_json::from_slice(&app.mneme(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["dead_letters"], expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_from_the_corpus_reaches_the_sqlite_files() {
    let app = App::start().await;
    let secrets = sanitize_corpus::secrets();
    let lookalikes = sanitize_corpus::lookalikes();
    assert!(secrets.len() >= 25 && lookalikes.len() >= 25);
    let js = async_nats::jetstream::new(app.client().await);
    let mut events = 0;
    for (i, sample) in secrets.iter().chain(&lookalikes).enumerate() {
        // Through the real hook: as a prompt and as a tool's output.
        let prompt = json!({"hook_event_name": "UserPromptSubmit", "session_id": "secrets", "cwd": "/tmp/s", "prompt": sample.text});
        let tool = json!({"hook_event_name": "PostToolUse", "session_id": "secrets", "cwd": "/tmp/s", "tool_name": "Bash",
            "tool_use_id": format!("toolu_{i}"), "tool_input": {"command": format!("cat config-{i}")},
            "tool_response": {"stdout": sample.text, "stderr": ""}});
        assert!(app.hook(prompt.to_string().as_bytes()).0.status.success());
        assert!(app.hook(tool.to_string().as_bytes()).0.status.success());
        // Straight to JetStream, unscrubbed, as a client that skips the hook would: ingest alone
        // must catch it.
        let raw = proto::Event {
            schema_version: proto::SCHEMA_VERSION,
            id: proto::new_event_id(),
            agent: proto::Agent::ClaudeCode as i32,
            session_id: "secrets-raw".into(),
            project: "/tmp/s".into(),
            host_event: "UserPromptSubmit".into(),
            extra_json: json!({"note": sample.text}).to_string(),
            // Numbered, so samples that read alike once redacted are not one duplicate event.
            payload: Some(proto::event::Payload::Prompt(proto::Prompt {
                text: format!("sample {i}: {}", sample.text),
            })),
            ..Default::default()
        };
        js.publish(raw.subject(), raw.encode_to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
        events += 3;
    }
    // A garbage message carrying a secret must not leak it through its dead letter either.
    let leaky = format!("\u{1}\u{2} not protobuf {}", secrets[0].text);
    js.publish("mneme.events.claude-code.prompt", leaky.into_bytes().into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations",
            events,
            Duration::from_secs(60)
        )
        .await,
        events
    );
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM dead_letters",
            1,
            Duration::from_secs(30)
        )
        .await,
        1
    );

    // Read the raw bytes of every SQLite file, WAL included, while the services still run.
    let mut bytes = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", app.db_path().display());
        if let Ok(b) = std::fs::read(&path) {
            bytes.extend(b);
        }
    }
    assert!(bytes.len() > 10_000);
    let haystack = String::from_utf8_lossy(&bytes);
    for sample in &secrets {
        assert!(
            !haystack.contains(&sample.secret),
            "secret {} ({}) reached the store",
            sample.name,
            sample.secret
        );
    }
    let store = app.store().await;
    for sample in &lookalikes {
        let (n,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM observations WHERE instr(body, ?) > 0")
                .bind(&sample.secret)
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert!(
            n >= 3,
            "look-alike {} ({}) was damaged: found in {n} observations",
            sample.name,
            sample.secret
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spool_holds_no_secret_either() {
    let mut app = App::bare();
    app.nats.stop();
    let secrets = sanitize_corpus::secrets();
    for sample in &secrets {
        let prompt = json!({"hook_event_name": "UserPromptSubmit", "session_id": "spool", "cwd": "/tmp", "prompt": sample.text});
        assert!(app.hook(prompt.to_string().as_bytes()).0.status.success());
    }
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(app.spool_dir()).unwrap() {
        bytes.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let haystack = String::from_utf8_lossy(&bytes);
    assert!(
        haystack.contains("[REDACTED"),
        "the spool should hold the scrubbed prompts"
    );
    for sample in &secrets {
        assert!(
            !haystack.contains(&sample.secret),
            "secret {} reached the spool",
            sample.name
        );
    }
}
