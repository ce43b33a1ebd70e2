//! Nothing left behind, nothing readable by others: mneme's files are owner-only whatever the
//! umask, and a deleted session leaves no trace of its text in the store's files.

use crate::harness::App;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn assert_mode(path: &Path, expected: u32) {
    assert_eq!(
        format!("{:o}", mode(path)),
        format!("{expected:o}"),
        "mode of {}",
        path.display()
    );
}

/// A Claude Code tool call in `session` whose output holds `text`.
fn tool_call(session: &str, text: &str) -> Vec<u8> {
    serde_json::json!({
        "hook_event_name": "PostToolUse",
        "session_id": session,
        "cwd": "/tmp/security-project",
        "tool_name": "Bash",
        "tool_use_id": format!("toolu_{session}"),
        "tool_input": {"command": "cat notes.txt"},
        "tool_response": {"stdout": text},
    })
    .to_string()
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_directory_store_spool_log_and_exports_are_owner_only() {
    let mut app = App::bare();
    // A data directory left readable by others (as an older mneme made it) is narrowed when a
    // service opens it.
    std::fs::set_permissions(app.home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    app.start_services_core(crate::harness::retrieval_args())
        .await;
    assert_mode(app.home.path(), 0o700);

    assert!(
        app.hook(&tool_call("modes", "the quarterly numbers"))
            .0
            .status
            .success()
    );
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations WHERE session_id = 'modes'",
            1,
            Duration::from_secs(30)
        )
        .await,
        1
    );
    let db = app.db_path();
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        assert_mode(Path::new(&name), 0o600);
    }

    // Exports, both kinds, wherever they are written.
    let out = tempfile::tempdir().unwrap();
    let jsonl = out.path().join("all.jsonl");
    let export = app.mneme(&["export", "--jsonl", "--out", jsonl.to_str().unwrap()]);
    assert!(export.status.success(), "{export:?}");
    assert_mode(&jsonl, 0o600);
    let markdown = out.path().join("md");
    let export = app.mneme(&["export", "--markdown", "--dir", markdown.to_str().unwrap()]);
    assert!(export.status.success(), "{export:?}");
    assert_mode(&markdown, 0o700);
    let projects: Vec<_> = std::fs::read_dir(&markdown)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(projects.len(), 1, "{projects:?}");
    let project = &projects[0];
    assert_mode(project, 0o700);
    assert_mode(&project.join("MEMORY.md"), 0o600);
    assert_mode(&project.join("HISTORY.md"), 0o600);

    // With NATS down the hook spools, into an owner-only directory of owner-only files, and
    // logs why, owner-only too.
    app.nats.stop();
    let (output, _) = app.hook(&tool_call("modes", "spooled while nats is down"));
    assert!(output.status.success());
    assert_eq!(app.spooled(), 1);
    assert_mode(&app.spool_dir(), 0o700);
    for entry in std::fs::read_dir(app.spool_dir()).unwrap() {
        assert_mode(&entry.unwrap().path(), 0o600);
    }
    let log = app.home.path().join("hook.log");
    if log.exists() {
        assert_mode(&log, 0o600);
    }
    app.nats.resume();
}

/// Whether `needle` occurs in the bytes of the file at `path` (a missing file holds nothing).
fn file_holds(path: &Path, needle: &str) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    bytes
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Whether any file under `dir` holds `needle`.
fn tree_holds(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            tree_holds(&path, needle)
        } else {
            file_holds(&path, needle)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_session_leaves_no_text_in_the_store_or_stream_files() {
    use proto::Message as _;
    let app = App::start_core().await;
    let marker = "zebrafinch-marker-4417";
    let text = format!("the deploy password hint is {marker} and nothing else");
    assert!(app.hook(&tool_call("doomed", &text)).0.status.success());
    // An event of the session that ingest cannot take (a schema version it does not know):
    // dead-lettered, with an excerpt, in the dead-letter stream and table.
    let lost = "osprey-marker-9902";
    let event = proto::Event {
        schema_version: 99,
        id: proto::new_event_id(),
        session_id: "doomed".into(),
        payload: Some(proto::event::Payload::Prompt(proto::Prompt {
            text: format!("a prompt from the future holding {lost}"),
        })),
        ..Default::default()
    };
    let jetstream = async_nats::jetstream::new(app.client().await);
    jetstream
        .publish(
            proto::subjects::event_subject("claude_code", "prompt"),
            event.encode_to_vec().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let letters = "SELECT count(*) FROM dead_letters";
    assert_eq!(
        app.wait_for_count(letters, 1, Duration::from_secs(30))
            .await,
        1
    );
    let streams = app.home.path().join("jetstream");
    assert!(
        tree_holds(&streams, marker),
        "the event never reached the stream's files"
    );
    assert!(
        tree_holds(&streams, lost),
        "the dead letter never reached the stream's files"
    );
    // A session that stays, so the pages the deleted rows shared are rewritten, not dropped.
    assert!(
        app.hook(&tool_call("kept", "an unrelated tool output that stays"))
            .0
            .status
            .success()
    );
    let items = "SELECT count(*) FROM memory_items WHERE session_id = 'doomed'";
    assert!(app.wait_for_count(items, 1, Duration::from_secs(30)).await >= 1);
    let store = app.store().await;
    // Checkpointed while the text is live, so the database file itself holds it before the
    // delete (what secure_delete must then overwrite).
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(store.pool())
        .await
        .unwrap();
    assert!(
        file_holds(&app.db_path(), marker),
        "the marker never reached the file"
    );

    let reply = app.delete_sessions(&["doomed"]).await;
    assert_eq!((reply.sessions, reply.error.as_str()), (1, ""));
    assert_eq!(
        app.wait_for_count(
            "SELECT 1 - count(*) FROM memory_items WHERE session_id = 'doomed'",
            1,
            Duration::from_secs(30)
        )
        .await,
        1,
        "retrieval did not forget the deleted session"
    );
    // Old frames of the WAL hold the pages as they were before the delete until a checkpoint
    // copies the new ones back and the log restarts; after it, the file is what remains.
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(busy, 0, "the checkpoint was blocked");
    let mut wal = app.db_path().into_os_string();
    wal.push("-wal");
    for file in [app.db_path(), wal.into()] {
        assert!(
            !file_holds(&file, marker),
            "{} still holds the deleted text",
            file.display()
        );
    }
    // JetStream erased the session's raw events and its dead letter: overwritten in the
    // streams' files, not only marked deleted.
    assert_eq!(app.count(letters).await, 0, "the dead letter's row stayed");
    assert!(
        !tree_holds(&streams, marker),
        "the events stream still holds the deleted text"
    );
    assert!(
        !tree_holds(&streams, lost),
        "the dead-letter stream still holds the deleted text"
    );
    assert!(
        app.hook(&tool_call("kept", "the stream still takes events"))
            .0
            .status
            .success()
    );
    store.close().await;
}

/// `mneme doctor` as JSON, and whether it exited 0.
fn doctor(app: &App, env: &[(&str, String)]) -> (serde_json::Value, bool) {
    let output = std::process::Command::new(crate::harness::binary("mneme"))
        .arg("doctor")
        .arg("--json")
        .envs(app.env())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    (report, output.status.success())
}

/// The findings of one topic, as `(ok, text)`.
fn findings<'a>(report: &'a serde_json::Value, topic: &str) -> Vec<(bool, &'a str)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["topic"] == topic)
        .map(|f| (f["ok"] == true, f["text"].as_str().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_modes_nats_auth_the_hooks_identity_the_spool_and_the_api() {
    let app = App::start_core().await;
    assert!(
        app.hook(&tool_call("doc-1", "something to store"))
            .0
            .status
            .success()
    );
    let api = [("MNEME_API_ADDR", "127.0.0.1:1".to_owned())];
    let (report, healthy) = doctor(&app, &api);
    assert!(healthy, "{report:#}");
    assert_eq!(report["problems"], 0);
    assert!(
        findings(&report, "nats")[0]
            .1
            .contains("refuses clients without credentials")
    );
    let hook = findings(&report, "hook");
    assert!(
        hook[0].0 && hook[0].1.contains("the hook identity"),
        "{hook:?}"
    );
    assert!(findings(&report, "files")[0].1.contains("owner only"));
    assert!(findings(&report, "api")[0].1.contains("this machine only"));

    // A store another user can read, a hook holding the owner's key, an api beyond loopback.
    std::fs::set_permissions(app.db_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let admin = proto::defaults::nats_keys_dir(app.home.path()).join("admin.nk");
    let (report, healthy) = doctor(
        &app,
        &[
            ("MNEME_NATS_NKEY", admin.display().to_string()),
            ("MNEME_API_ADDR", "0.0.0.0:1".to_owned()),
        ],
    );
    assert!(!healthy);
    assert_eq!(report["problems"], 3, "{report:#}");
    let files = findings(&report, "files");
    assert!(
        !files[0].0 && files[0].1.contains("mneme.db (644)"),
        "{files:?}"
    );
    let hook = findings(&report, "hook");
    assert!(
        !hook[0].0 && hook[0].1.contains("the admin identity"),
        "{hook:?}"
    );
    assert!(!findings(&report, "api")[0].0);
    std::fs::set_permissions(app.db_path(), std::fs::Permissions::from_mode(0o600)).unwrap();

    // A server without auth is said to be one.
    let open = App::bare_with_nats(None);
    let (report, healthy) = doctor(&open, &api);
    assert!(!healthy);
    let nats = findings(&report, "nats");
    assert!(
        !nats[0].0 && nats[0].1.contains("without credentials"),
        "{nats:?}"
    );
}

/// One raw HTTP/1.1 request with the given `Host` header and optional extra header lines;
/// returns the status line's code.
fn status_with_host(port: u16, request_line: &str, host: &str, extra: &str, body: &str) -> u16 {
    use std::io::{Read as _, Write as _};
    let mut http = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        http,
        "{request_line} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// DNS rebinding: a page on the attacker's name, resolved to 127.0.0.1 after it loaded, sends
/// its own name as Host. Loopback reads need no token, so the api answers only requests
/// addressed to an IP, `localhost` or a name it was told (MNEME_API_HOSTS), MCP included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_addressed_to_a_name_the_api_was_not_given_are_refused() {
    let mut app = App::start_core().await;
    let base = app
        .start_api(api::ApiArgs {
            hosts: vec!["devbox".to_owned()],
            token: Some("a-long-enough-test-token-4471".to_owned()),
            ..Default::default()
        })
        .await;
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    let read = "GET /v1/sessions";
    assert_eq!(
        status_with_host(port, read, "attacker.example", "", ""),
        421
    );
    assert_eq!(
        status_with_host(
            port,
            read,
            &format!("rebound.attacker.example:{port}"),
            "",
            ""
        ),
        421
    );
    assert_eq!(
        status_with_host(port, "GET /v1/export", "evil.test", "", ""),
        421
    );
    for allowed in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "[::1]".to_owned(),
        format!("DevBox:{port}"),
    ] {
        assert_eq!(
            status_with_host(port, read, &allowed, "", ""),
            200,
            "{allowed}"
        );
    }
    // MCP answers a box's configured name (with the token), and not an unknown one.
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let headers = "authorization: Bearer a-long-enough-test-token-4471\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n";
    assert_eq!(
        status_with_host(
            port,
            "POST /mcp",
            &format!("devbox:{port}"),
            headers,
            initialize
        ),
        200
    );
    assert_eq!(
        status_with_host(port, "POST /mcp", "attacker.example", headers, initialize),
        421
    );
    app.stop_services().await;
}

/// Every stream has a byte limit, so NATS's disk use has a bound whatever the traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_has_a_byte_limit() {
    let app = App::start_core().await;
    let jetstream = async_nats::jetstream::new(app.client().await);
    for config in common::streams::configs() {
        let mut stream = jetstream.get_stream(&config.name).await.unwrap();
        let limit = stream.info().await.unwrap().config.max_bytes;
        assert!(limit > 0 && limit <= 1 << 30, "{}: {limit}", config.name);
    }
}
