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

/// A client holding one identity of the key set, with that role's inbox, recording the
/// permission violations the server reports to it.
async fn connect_as(
    app: &App,
    role: proto::access::Role,
) -> (
    async_nats::Client,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let seed = proto::defaults::nats_keys_dir(app.home.path()).join(role.key_file());
    let seed = std::fs::read_to_string(seed).unwrap().trim().to_owned();
    let violations = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = violations.clone();
    let client = async_nats::ConnectOptions::with_nkey(seed)
        .custom_inbox_prefix(role.inbox_prefix())
        .event_callback(move |event| {
            let seen = seen.clone();
            async move {
                if let async_nats::Event::ServerError(error) = event {
                    seen.lock().unwrap().push(error.to_string());
                }
            }
        })
        .connect(app.nats.url())
        .await
        .unwrap();
    (client, violations)
}

/// Wait until the server has reported a permission violation naming `subject`.
async fn refused(violations: &std::sync::Mutex<Vec<String>>, subject: &str) -> bool {
    crate::harness::wait_until(Duration::from_secs(5), || async {
        violations
            .lock()
            .unwrap()
            .iter()
            .any(|v| v.to_lowercase().contains("permissions violation") && v.contains(subject))
    })
    .await
    .is_ok()
}

/// Whether `subscription` receives a message within `wait`.
async fn receives(subscription: &mut async_nats::Subscriber, wait: Duration) -> bool {
    use futures::StreamExt as _;
    tokio::time::timeout(wait, subscription.next())
        .await
        .is_ok_and(|m| m.is_some())
}

/// The hook's key is on every developer's machine: with it one may publish events and ask for
/// context and search, and nothing else. Everything here runs on the harness's server, which
/// admits only mneme's identities with their permissions (as `mneme up`'s does), and the
/// services, the hook binary and the command line work with only their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_key_publishes_events_and_asks_for_memory_and_can_do_nothing_else() {
    use proto::Message as _;
    use proto::access::Role;
    use proto::subjects;
    let mut app = App::start().await;
    let (output, _) = app.hook(&prompt("kept-1", "the hook identity stores this zq81"));
    assert!(output.status.success());
    let stored = "SELECT count(*) FROM observations WHERE session_id = 'kept-1'";
    assert_eq!(
        app.wait_for_count(stored, 1, Duration::from_secs(30)).await,
        1
    );
    assert_eq!(app.spooled(), 0, "the hook's own key was refused");
    app.wait_indexed(1).await;

    // No key at all: refused, and the hook spools.
    let (output, _) = app.hook_as(
        "claude-code",
        &prompt("kept-1", "without a key"),
        &[("MNEME_NATS_KEYS", "/nonexistent".to_owned())],
    );
    assert!(output.status.success());
    assert_eq!(app.spooled(), 1);
    std::fs::remove_dir_all(app.spool_dir()).unwrap();

    let (hook, violations) = connect_as(&app, Role::Hook).await;
    let (owner, _) = connect_as(&app, Role::Admin).await;

    // It may ask for search and context, and gets retrieval's answer.
    let search = proto::SearchRequest {
        query: "zq81".into(),
        limit: 5,
        ..Default::default()
    };
    let reply = hook
        .request(subjects::RETRIEVAL_SEARCH, search.encode_to_vec().into())
        .await
        .expect("the hook may search");
    assert!(
        !proto::SearchReply::decode(reply.payload)
            .unwrap()
            .hits
            .is_empty()
    );

    // It cannot read everything, another identity's replies, or serve retrieval's subjects.
    let mut everything = hook.subscribe(">").await.unwrap();
    assert!(refused(&violations, ">").await, "{violations:?}");
    let mut replies = hook.subscribe("_INBOX.admin.>").await.unwrap();
    assert!(refused(&violations, "_INBOX.admin.>").await);
    let mut impostor = hook
        .queue_subscribe(
            subjects::RETRIEVAL_CONTEXT,
            subjects::RETRIEVAL_QUEUE.to_owned(),
        )
        .await
        .unwrap();
    assert!(refused(&violations, subjects::RETRIEVAL_CONTEXT).await);
    hook.flush().await.unwrap();
    let answered = owner
        .request(subjects::RETRIEVAL_SEARCH, search.encode_to_vec().into())
        .await
        .unwrap();
    assert!(
        !proto::SearchReply::decode(answered.payload)
            .unwrap()
            .hits
            .is_empty()
    );
    let context = proto::ContextRequest {
        moment: proto::context_request::Moment::Prompt as i32,
        session_id: "next-1".into(),
        prompt: "zq81".into(),
        ..Default::default()
    };
    for _ in 0..5 {
        owner
            .request(subjects::RETRIEVAL_CONTEXT, context.encode_to_vec().into())
            .await
            .expect("retrieval, not the hook, answers context");
    }
    assert!(!receives(&mut everything, Duration::from_millis(300)).await);
    assert!(!receives(&mut replies, Duration::from_millis(100)).await);
    assert!(!receives(&mut impostor, Duration::from_millis(100)).await);

    // It cannot delete sessions, change retention or touch JetStream's API.
    let delete = proto::DeleteSessionsRequest {
        session_ids: vec!["kept-1".into()],
    };
    assert!(
        hook.request(subjects::SESSIONS_DELETE, delete.encode_to_vec().into())
            .await
            .is_err()
    );
    assert!(refused(&violations, subjects::SESSIONS_DELETE).await);
    for subject in [
        subjects::RETENTION_SET.to_owned(),
        format!("$JS.API.STREAM.DELETE.{}", subjects::EVENTS_STREAM),
        format!("$JS.API.STREAM.PURGE.{}", subjects::EVENTS_STREAM),
    ] {
        hook.publish(subject.clone(), "{}".into()).await.unwrap();
        assert!(
            refused(&violations, &subject).await,
            "{subject}: {violations:?}"
        );
    }
    hook.flush().await.unwrap();
    let jetstream = async_nats::jetstream::new(owner.clone());
    let mut events = jetstream.get_stream(subjects::EVENTS_STREAM).await.unwrap();
    assert!(events.info().await.unwrap().state.messages >= 1);
    assert_eq!(app.count(stored).await, 1, "a hook key deleted a session");

    // A service key is its service's alone: retrieval's cannot publish events or delete.
    let (retrieval, violations) = connect_as(&app, Role::Retrieval).await;
    for subject in [
        subjects::event_subject("claude_code", "prompt"),
        subjects::SESSIONS_DELETE.to_owned(),
    ] {
        retrieval
            .publish(subject.clone(), "{}".into())
            .await
            .unwrap();
        assert!(
            refused(&violations, &subject).await,
            "{subject}: {violations:?}"
        );
    }

    // The owner's key (the command line's) may delete.
    let reply: proto::SessionsChangedReply = app.ask(subjects::SESSIONS_DELETE, &delete).await;
    assert!(reply.error.is_empty(), "{}", reply.error);
    assert_eq!(app.count(stored).await, 0);
    app.stop_services().await;
}
