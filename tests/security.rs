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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_session_leaves_no_text_in_the_store_files() {
    let app = App::start_core().await;
    let marker = "zebrafinch-marker-4417";
    let text = format!("the deploy password hint is {marker} and nothing else");
    assert!(app.hook(&tool_call("doomed", &text)).0.status.success());
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

    let reply: proto::SessionsChangedReply = app
        .ask(
            proto::subjects::SESSIONS_DELETE,
            &proto::DeleteSessionsRequest {
                session_ids: vec!["doomed".to_owned()],
            },
        )
        .await;
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
    store.close().await;
}
