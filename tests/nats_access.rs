//! How services and hooks reach NATS: an NKey user on a server that requires one (the dev box
//! listening beyond localhost), and a server that comes up after the services.

use crate::harness::{App, binary, retrieval_args};
use std::time::Duration;

fn prompt(session: &str, text: &str) -> Vec<u8> {
    serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": session,
        "cwd": "/work/box", "prompt": text})
    .to_string()
    .into_bytes()
}

/// A new NKey user from `mneme nats-key`: its seed file and its public key.
fn new_key(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let seed = dir.join(name);
    let output = std::process::Command::new(binary("mneme"))
        .args(["nats-key", "--out"])
        .arg(&seed)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let public = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert!(public.starts_with('U') && public.len() == 56, "{public}");
    (seed, public)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nkey_server_takes_keyed_clients_and_the_hook_spools_until_it_has_the_key() {
    let keys = tempfile::tempdir().unwrap();
    let (seed, public) = new_key(keys.path(), "mneme.nk");
    // The seed is its owner's alone, and a second key never replaces the first.
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&seed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = std::process::Command::new(binary("mneme"))
        .args(["nats-key", "--out"])
        .arg(&seed)
        .output()
        .unwrap();
    assert!(!again.status.success());
    let mut app = App::bare_with_nats(Some(&format!(
        "authorization {{ users = [ {{ nkey: \"{public}\" }} ] }}"
    )));
    // No key: the server refuses the hook, which spools the event and still exits 0.
    let (output, _) = app.hook(&prompt("box-1", "first, without a key"));
    assert!(output.status.success());
    assert_eq!(app.spooled(), 1);

    // A file that is not a seed is refused with a reason before any connection is tried.
    let not_a_seed = app.home.path().join("not-a-seed");
    std::fs::write(&not_a_seed, &public).unwrap();
    let mut wrong = app.common.clone();
    wrong.nats_nkey = Some(not_a_seed);
    let error = common::nats::connect(&wrong, "test", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(format!("{error:#}").contains("nkey user seed"), "{error:#}");

    // The services with the key start and answer (the harness's health probes use it too).
    app.common.nats_nkey = Some(seed);
    app.start_services_core(retrieval_args()).await;

    // A hook with the key gets through and replays what it spooled.
    let (output, _) = app.hook(&prompt("box-1", "second, with the key"));
    assert!(output.status.success());
    let stored = "SELECT count(*) FROM observations WHERE session_id = 'box-1'";
    assert_eq!(
        app.wait_for_count(stored, 2, Duration::from_secs(30)).await,
        2
    );
    assert_eq!(app.spooled(), 0);

    // Another user's key is not on the server's list: refused, spooled.
    let (stranger, _) = new_key(keys.path(), "stranger.nk");
    let (output, _) = app.hook_as(
        "claude-code",
        &prompt("box-1", "third, with a stranger's key"),
        &[("MNEME_NATS_NKEY", stranger.display().to_string())],
    );
    assert!(output.status.success());
    assert_eq!(app.spooled(), 1);
    assert_eq!(app.count(stored).await, 2);
    app.stop_services().await;
}

/// Compose starts the services alongside NATS, so one may come up first: it keeps trying, and
/// works once the server is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_started_before_nats_connects_when_it_comes_up() {
    let mut app = App::bare();
    app.nats.stop();
    let shutdown = app.shutdown.clone();
    let ingest = tokio::spawn(ingest::run(
        app.common.clone(),
        ingest::IngestArgs::default(),
        shutdown,
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!ingest.is_finished(), "ingest gave up while nats was down");
    app.nats.resume();
    assert!(
        app.wait_healthy("ingest", Duration::from_secs(30)).await,
        "ingest did not come up after nats did"
    );
    let (output, _) = app.hook(&prompt("late-1", "nats came up after ingest"));
    assert!(output.status.success());
    let stored = "SELECT count(*) FROM observations WHERE session_id = 'late-1'";
    assert_eq!(
        app.wait_for_count(stored, 1, Duration::from_secs(30)).await,
        1
    );
    assert_eq!(app.spooled(), 0);
    app.shutdown.cancel();
    ingest.await.unwrap().unwrap();
}
