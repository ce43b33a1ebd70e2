//! The write path end to end: real transcripts through the real hook, NATS outages, crashes.

use crate::harness::{App, binary, transcripts_dir};
use hosts::claude_code::transcript::{Replay, claude_code_replay};
use proto::Message as _;
use std::collections::BTreeMap;
use std::time::Duration;

fn replays() -> Vec<Replay> {
    let mut files: Vec<_> = std::fs::read_dir(transcripts_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| claude_code_replay(f).unwrap())
        .collect()
}

/// (host_event, tool_use_id, kind) of every stored observation of a session, in storage order.
async fn stored_sequence(app: &App, session: &str) -> Vec<(String, String)> {
    let store = app.store().await;
    sqlx::query_as(
        "SELECT host_event, tool_use_id FROM observations WHERE session_id = ? ORDER BY id",
    )
    .bind(session)
    .fetch_all(store.pool())
    .await
    .unwrap()
}

fn payload_sequence(replay: &Replay) -> Vec<(String, String)> {
    replay
        .payloads
        .iter()
        .map(|p| {
            (
                p["hook_event_name"].as_str().unwrap_or_default().to_owned(),
                p["tool_use_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Run a `SELECT key, count(*) … WHERE session_id = ? GROUP BY key` into a map.
async fn grouped_counts(
    store: &store::Store,
    sql: &'static str,
    session: &str,
) -> BTreeMap<String, usize> {
    sqlx::query_as::<_, (String, i64)>(sql)
        .bind(session)
        .fetch_all(store.pool())
        .await
        .unwrap()
        .into_iter()
        .map(|(k, n)| (k, n as usize))
        .collect()
}

async fn assert_session_matches(app: &App, replay: &Replay) {
    let store = app.store().await;
    let per_event = grouped_counts(
        &store,
        "SELECT host_event, count(*) FROM observations WHERE session_id = ? GROUP BY host_event",
        &replay.session_id,
    )
    .await;
    assert_eq!(
        per_event, replay.expected.per_event,
        "events of session {}",
        replay.session_id
    );
    let per_tool = grouped_counts(
        &store,
        "SELECT tool_name, count(*) FROM observations
         WHERE session_id = ? AND kind IN ('post_tool', 'tool_failure') GROUP BY tool_name",
        &replay.session_id,
    )
    .await;
    assert_eq!(
        per_tool, replay.expected.per_tool,
        "tools of session {}",
        replay.session_id
    );
    let (events, prompts): (i64, i64) =
        sqlx::query_as("SELECT event_count, prompt_count FROM sessions WHERE id = ?")
            .bind(&replay.session_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(events as usize, replay.payloads.len());
    assert_eq!(prompts as usize, replay.expected.prompts);
    let stored = stored_sequence(app, &replay.session_id).await;
    let fired = payload_sequence(replay);
    if stored != fired {
        let at = stored
            .iter()
            .zip(&fired)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let log = std::fs::read_to_string(app.home.path().join("hook.log")).unwrap_or_default();
        panic!(
            "order of session {} differs from event {at}: stored {:?}, fired {:?}\nhook log:\n{log}",
            replay.session_id,
            &stored[at..(at + 3).min(stored.len())],
            &fired[at..(at + 3).min(fired.len())]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_transcripts_through_the_real_hook_are_stored_exactly_once() {
    let app = App::start().await;
    let replays = replays();
    assert!(replays.len() >= 5, "expected the shipped transcripts");
    let total: usize = replays.iter().map(|r| r.payloads.len()).sum();
    // Sessions run side by side, as they would on a busy machine; events within one session
    // are sequential, as Claude Code fires them.
    let app = std::sync::Arc::new(app);
    let mut tasks = Vec::new();
    for replay in replays.clone() {
        let app = app.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            let mut slowest = Duration::ZERO;
            for payload in &replay.payloads {
                let (output, took) = app.hook(payload.to_string().as_bytes());
                assert!(output.status.success(), "hook failed: {output:?}");
                slowest = slowest.max(took);
            }
            slowest
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            total as i64,
            Duration::from_secs(60),
        )
        .await;
    let log = std::fs::read_to_string(app.home.path().join("hook.log")).unwrap_or_default();
    assert_eq!(stored, total as i64, "hook log:\n{log}");
    for replay in &replays {
        assert_session_matches(&app, replay).await;
    }
    assert_eq!(app.count("SELECT count(*) FROM dead_letters").await, 0);
    assert_eq!(app.spooled(), 0);
    // Every stored observation was announced once for downstream services.
    let js = async_nats::jetstream::new(app.client().await);
    let mut stream = js.get_stream(proto::subjects::INGEST_STREAM).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, total as u64);
    // A compaction in a transcript is recorded as such.
    assert!(
        app.count("SELECT count(*) FROM compactions WHERE phase = 'post'")
            .await
            >= 5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_outage_mid_replay_spools_then_delivers_everything_once_in_order() {
    let mut app = App::start().await;
    let replay = replays()
        .into_iter()
        .find(|r| r.payloads.len() > 300)
        .unwrap();
    let payloads = &replay.payloads;
    let (first, rest) = payloads.split_at(100);
    let (outage, after) = rest.split_at(120);
    for payload in first {
        assert!(app.hook(payload.to_string().as_bytes()).0.status.success());
    }
    app.nats.stop();
    let mut slowest = Duration::ZERO;
    for payload in outage {
        let (output, took) = app.hook(payload.to_string().as_bytes());
        assert!(
            output.status.success(),
            "hook must exit 0 with nats down: {output:?}"
        );
        assert!(
            output.stdout.is_empty(),
            "hook printed something with nats down"
        );
        slowest = slowest.max(took);
    }
    assert!(
        slowest < Duration::from_secs(2),
        "hook took {slowest:?} with nats down"
    );
    let spooled = app.spooled();
    assert_eq!(spooled, outage.len());
    // `mneme status` counts what waits in the spool.
    let status: serde_json::Value =
        serde_json::from_slice(&app.mneme(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["spooled"], outage.len());

    app.nats.resume();
    for payload in after {
        assert!(app.hook(payload.to_string().as_bytes()).0.status.success());
    }
    let total = payloads.len() as i64;
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            total,
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(stored, total);
    assert_session_matches(&app, &replay).await;
    assert_eq!(app.spooled(), 0);
    app.stop_services().await;
}

/// Publish `n` events spread over a few sessions straight to JetStream, as many hooks would.
async fn publish_events(app: &App, n: usize) {
    let js = async_nats::jetstream::new(app.client().await);
    common::streams::ensure(&js).await.unwrap();
    let mut acks = Vec::new();
    for i in 0..n {
        let event = proto::Event {
            schema_version: proto::SCHEMA_VERSION,
            id: proto::new_event_id(),
            occurred_at_ms: common::time::now_ms(),
            agent: proto::Agent::ClaudeCode as i32,
            session_id: format!("crash-{}", i % 4),
            project: "/work/crash".into(),
            cwd: "/work/crash".into(),
            host_event: "PostToolUse".into(),
            payload: Some(proto::event::Payload::PostTool(proto::ToolCall {
                tool_name: "Bash".into(),
                tool_use_id: format!("toolu_{i}"),
                input_json: format!(r#"{{"command":"echo {i}"}}"#),
                response_json: format!(r#"{{"stdout":"{i}"}}"#),
                ..Default::default()
            })),
            ..Default::default()
        };
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
        acks.push(
            js.publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
                .await
                .unwrap(),
        );
        if acks.len() == 1000 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_ingest_mid_batch_loses_nothing_and_doubles_nothing() {
    let app = App::bare();
    let total = 20_000;
    publish_events(&app, total).await;
    let spawn = || {
        std::process::Command::new(binary("mneme-ingest"))
            .envs(app.env())
            .env("MNEME_INGEST_BATCH", "100")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = spawn();
    // Kill it (SIGKILL: no shutdown handling at all) once it is well into the stream.
    let seen = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            2_000,
            Duration::from_secs(60),
        )
        .await;
    first.kill().unwrap();
    first.wait().unwrap();
    let at_kill = app.count("SELECT count(*) FROM observations").await;
    assert!(
        seen >= 2_000 && at_kill < total as i64,
        "the kill must land mid-stream (stored {at_kill})"
    );

    let mut second = spawn();
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations",
            total as i64,
            Duration::from_secs(120),
        )
        .await;
    // Give redeliveries of anything acked late a moment to show up as doubles, if they would.
    tokio::time::sleep(Duration::from_millis(500)).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(stored, total as i64);
    assert_eq!(
        app.count("SELECT count(*) FROM observations").await,
        total as i64
    );
    assert_eq!(
        app.count("SELECT count(DISTINCT tool_use_id) FROM observations")
            .await,
        total as i64
    );
    assert_eq!(
        app.count("SELECT sum(event_count) FROM sessions").await,
        total as i64
    );
    assert_eq!(
        app.count("SELECT count(*) FROM observations_fts").await,
        total as i64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hook_event_is_one_trace_from_hook_through_ingest() {
    let app = App::bare();
    let mut ingest = std::process::Command::new(binary("mneme-ingest"))
        .envs(app.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        app.wait_healthy("ingest", Duration::from_secs(30)).await,
        "mneme-ingest did not become healthy"
    );
    let payload = serde_json::json!({"hook_event_name": "PostToolUse", "session_id": "trace", "cwd": "/tmp",
        "tool_name": "Bash", "tool_use_id": "toolu_trace", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"}});
    assert!(app.hook(payload.to_string().as_bytes()).0.status.success());
    assert_eq!(
        app.wait_for_count(
            "SELECT count(*) FROM observations",
            1,
            Duration::from_secs(30)
        )
        .await,
        1
    );
    let store = app.store().await;
    let (event_id,): (String,) = sqlx::query_as("SELECT event_id FROM observations")
        .fetch_one(store.pool())
        .await
        .unwrap();

    let js = async_nats::jetstream::new(app.client().await);
    let stream = js.get_stream(proto::subjects::INGEST_STREAM).await.unwrap();
    let message = stream.get_raw_message(1).await.unwrap();
    let stored = proto::ObservationStored::decode(message.payload.clone()).unwrap();
    assert_eq!(stored.event_id, event_id);
    let traceparent = message
        .headers
        .get(proto::subjects::TRACEPARENT_HEADER)
        .expect("ingest forwards the trace context")
        .to_string();
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(
        parts[1], event_id,
        "the trace the hook started (its id is the event id) continues through ingest"
    );
    ingest.kill().unwrap();
    ingest.wait().unwrap();
}

/// A hook payload: a prompt in `session`.
fn prompt_in(session: &str, text: &str) -> Vec<u8> {
    serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": session,
        "cwd": "/work/spool", "prompt": text})
    .to_string()
    .into_bytes()
}

/// The spool is bounded, and an event NATS refuses for itself (here: bigger than the server
/// takes in one message) does not block the events behind it: it is set aside after three
/// replays in which the events after it went through, and `mneme status` counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_spooled_event_is_set_aside_and_the_spool_keeps_its_bounds() {
    use proto::Message as _;
    let mut app = App::start_core().await;
    let spool = mneme_hook::spool::Spool::new(app.spool_dir());
    let huge = proto::Event {
        schema_version: proto::SCHEMA_VERSION,
        id: proto::new_event_id(),
        occurred_at_ms: common::time::now_ms(),
        agent: proto::Agent::ClaudeCode as i32,
        session_id: "spool-1".into(),
        payload: Some(proto::event::Payload::Prompt(proto::Prompt {
            text: "x".repeat(2 * 1024 * 1024),
        })),
        ..Default::default()
    };
    spool.write(&huge.id, &huge.encode_to_vec()).unwrap();
    let stored = "SELECT count(*) FROM observations WHERE session_id = 'spool-1'";
    for n in 1..=3 {
        let (output, _) = app.hook(&prompt_in(
            "spool-1",
            &format!("prompt {n} behind the huge one"),
        ));
        assert!(output.status.success());
        // The event of this run went through although the one before it was refused.
        assert_eq!(
            app.wait_for_count(stored, n, Duration::from_secs(30)).await,
            n,
            "run {n}: the events behind a refused one were held back"
        );
    }
    let stats = spool.stats();
    assert_eq!((stats.pending, stats.set_aside), (0, 1), "{stats:?}");
    assert!(app.spool_dir().join(format!("{}.failed", huge.id)).exists());
    let status: serde_json::Value =
        serde_json::from_slice(&app.mneme(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["spool"]["set_aside"], 1);

    // With NATS down and a bound of 2 KB, the spool keeps only the newest events that fit.
    app.nats.stop();
    let bound = [("MNEME_SPOOL_MAX_BYTES", "2048".to_owned())];
    for n in 0..12 {
        let text = format!("offline prompt {n} {}", "y".repeat(300));
        let (output, _) = app.hook_as("claude-code", &prompt_in("spool-2", &text), &bound);
        assert!(output.status.success());
    }
    let stats = spool.stats();
    assert!(stats.bytes <= 2048, "{stats:?}");
    assert!(stats.pending >= 2 && stats.pending < 12, "{stats:?}");
    assert_eq!(stats.dropped, 12 - stats.pending, "{stats:?}");
    let status = app.mneme(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!(
            "{} dropped over the bounds, 1 set aside",
            stats.dropped
        )),
        "{text}"
    );
    // The newest survive, and go out when NATS is back.
    app.nats.resume();
    let (output, _) = app.hook(&prompt_in("spool-2", "back online"));
    assert!(output.status.success());
    let kept = "SELECT count(*) FROM observations WHERE session_id = 'spool-2'";
    let expected = stats.pending as i64 + 1;
    assert_eq!(
        app.wait_for_count(kept, expected, Duration::from_secs(30))
            .await,
        expected
    );
    let last: (String,) = sqlx::query_as(
        "SELECT body FROM observations WHERE session_id = 'spool-2' ORDER BY id DESC LIMIT 1 OFFSET 1",
    )
    .fetch_one(app.store().await.pool())
    .await
    .unwrap();
    assert!(last.0.contains("offline prompt 11"), "{}", last.0);
    app.stop_services().await;
}
