//! Traces: one hook event is one trace across the hook and the services, each service its own
//! process (as compose runs them), exported over OTLP/gRPC to a real receiver in this test.

use crate::harness::{App, binary, wait_until};
use otlp_sink::{Sink, Span};
use proto::Message as _;
use proto::subjects;
use serde_json::json;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The pipeline services as separate processes.
struct Services {
    children: Vec<(&'static str, Child)>,
}

impl Services {
    /// Start ingest, retrieval, compressor and pattern exporting to `endpoint`, and wait until
    /// each answers its health probe.
    async fn start(app: &App, endpoint: &str) -> Services {
        let log = std::env::var_os("TEST_LOG").is_some();
        let children = ["ingest", "retrieval", "compressor", "pattern"]
            .into_iter()
            .map(|service| {
                let child = Command::new(binary(&format!("mneme-{service}")))
                    .envs(app.env())
                    .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
                    // Far longer than the test: the spans can only arrive through the flush at
                    // shutdown, so the test proves that flush.
                    .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
                    .stdout(Stdio::null())
                    .stderr(if log { Stdio::inherit() } else { Stdio::null() })
                    .spawn()
                    .unwrap();
                (service, child)
            })
            .collect();
        let services = Services { children };
        let client = app.client().await;
        for (service, _) in &services.children {
            let healthy = wait_until(Duration::from_secs(60), || async {
                client
                    .request(
                        subjects::health_subject(service),
                        proto::HealthRequest {}.encode_to_vec().into(),
                    )
                    .await
                    .is_ok()
            })
            .await;
            assert!(healthy.is_ok(), "mneme-{service} did not become healthy");
        }
        services
    }

    /// Stop every service with SIGTERM, as compose and systemd do, and wait for each to exit.
    fn stop(&mut self) {
        for (service, child) in &mut self.children {
            let sent = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success(), "could not signal mneme-{service}");
            let status = child.wait().unwrap();
            assert!(status.success(), "mneme-{service} exited with {status}");
        }
        self.children.clear();
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Wait until the durable consumer `consumer` of `stream` has nothing pending or unacked.
async fn caught_up(js: &async_nats::jetstream::Context, stream: &str, consumer: &str) {
    let done = wait_until(Duration::from_secs(30), || async {
        let Ok(stream) = js.get_stream(stream).await else {
            return false;
        };
        match stream.consumer_info(consumer).await {
            Ok(info) => {
                info.num_pending == 0
                    && info.num_ack_pending == 0
                    && info.delivered.stream_sequence > 0
            }
            Err(_) => false,
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "{consumer} did not handle everything on {stream}"
    );
}

/// Every text a span shows a collector: its name, attribute keys and values, status.
fn texts(span: &Span) -> impl Iterator<Item = &str> {
    [span.name.as_str(), span.status.as_str()]
        .into_iter()
        .chain(
            span.attributes
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()]),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hook_event_is_one_trace_across_services() {
    let (sink, addr) = Sink::serve("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{addr}");
    let app = App::bare();
    let mut services = Services::start(&app, &endpoint).await;

    // A prompt asks retrieval for context (request/reply) and is stored by ingest, whose notice
    // the compressor, the pattern service and retrieval's indexer all handle.
    let secret = sanitize_corpus::secrets()
        .into_iter()
        .find(|s| s.name == "aws-access-key-id")
        .unwrap();
    let marker = "zebracorn";
    let prompt = format!("plan the {marker} migration; {}", secret.text);
    let payload = json!({"hook_event_name": "UserPromptSubmit", "session_id": "traced",
        "cwd": "/tmp/traced", "prompt": prompt});
    let (output, _) = app.hook_as(
        "claude-code",
        payload.to_string().as_bytes(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone())],
    );
    assert!(output.status.success());

    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations WHERE session_id = 'traced'",
            1,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(stored, 1, "the prompt was not stored");
    let store = app.store().await;
    let (event_id,): (String,) =
        sqlx::query_as("SELECT event_id FROM observations WHERE session_id = 'traced'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let js = async_nats::jetstream::new(app.client().await);
    caught_up(&js, subjects::EVENTS_STREAM, subjects::INGEST_CONSUMER).await;
    for consumer in [
        subjects::COMPRESSOR_CONSUMER,
        subjects::PATTERN_CONSUMER,
        subjects::RETRIEVAL_CONSUMER,
    ] {
        caught_up(&js, subjects::INGEST_STREAM, consumer).await;
    }
    services.stop();

    let expected: BTreeSet<&str> = [
        "mneme-hook",
        "mneme-ingest",
        "mneme-retrieval",
        "mneme-compressor",
        "mneme-pattern",
    ]
    .into();
    let trace = |sink: &Sink| -> Vec<Span> {
        sink.spans()
            .into_iter()
            .filter(|s| s.trace_id == event_id)
            .collect()
    };
    let _ = wait_until(Duration::from_secs(10), || async {
        let services: BTreeSet<String> = trace(&sink).into_iter().map(|s| s.service).collect();
        expected.iter().all(|e| services.contains(*e))
    })
    .await;
    let spans = trace(&sink);
    let summary: Vec<String> = spans
        .iter()
        .map(|s| format!("{} {} {:?}", s.service, s.name, s.attributes))
        .collect();
    let services: BTreeSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert!(
        expected.is_subset(&services),
        "the trace of event {event_id} has spans from {services:?}, expected {expected:?}:\n{}",
        summary.join("\n")
    );

    // One trace: a single root (the hook run), and every other span's parent is in it.
    let ids: BTreeSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "roots: {roots:?}");
    assert_eq!(roots[0].service, "mneme-hook");
    for span in &spans {
        assert!(
            span.parent_span_id.is_empty() || ids.contains(span.parent_span_id.as_str()),
            "{} {} hangs from a span outside the trace:\n{}",
            span.service,
            span.name,
            summary.join("\n")
        );
    }

    // Every service names the event, its session and the subject it handled.
    for service in &expected {
        let named = spans.iter().any(|s| {
            s.service == *service
                && s.attributes.get("event_id") == Some(&event_id)
                && s.attributes.get("session_id").map(String::as_str) == Some("traced")
                && s.attributes
                    .get("subject")
                    .is_some_and(|subject| subject.starts_with("mneme."))
        });
        assert!(
            named,
            "no {service} span carries the event id, session and subject:\n{}",
            summary.join("\n")
        );
    }
    let context = spans
        .iter()
        .find(|s| s.name == "retrieval.request")
        .expect("retrieval answered the context request inside the trace");
    assert_eq!(
        context.attributes.get("subject").map(String::as_str),
        Some(subjects::RETRIEVAL_CONTEXT)
    );

    // Nothing from the payload, and so nothing secret, is in any span the collector received.
    for span in sink.spans() {
        for text in texts(&span) {
            assert!(
                !text.contains(&secret.secret) && !text.contains(marker),
                "{} {} carries payload content: {text:?}",
                span.service,
                span.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_collector_does_not_hold_the_hook_up() {
    // A collector that accepts connections and never answers: the worst case for the export.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let app = App::start_core().await;
    let payload = json!({"hook_event_name": "PostToolUse", "session_id": "silent",
        "cwd": "/tmp/silent", "tool_name": "Bash", "tool_use_id": "toolu_1",
        "tool_input": {"command": "cargo test"}, "tool_response": {"stdout": "ok", "stderr": ""}});
    let (output, took) = app.hook_as(
        "claude-code",
        payload.to_string().as_bytes(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("MNEME_HOOK_OTLP_TIMEOUT_MS", "300".to_owned()),
        ],
    );
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "PostToolUse prints nothing");
    // Publishing takes a few milliseconds; the export gives up after 300 ms. The exporter's own
    // default would wait ten seconds.
    assert!(
        took < Duration::from_millis(2500),
        "the hook took {took:?} with a silent collector"
    );
    let stored = app
        .wait_for_count(
            "SELECT count(*) FROM observations WHERE session_id = 'silent'",
            1,
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(stored, 1, "the event was not delivered");
    let log = std::fs::read_to_string(app.home.path().join("hook.log")).unwrap_or_default();
    assert!(
        log.contains("traces not exported"),
        "the hook log does not say why no spans left: {log:?}"
    );
    drop(silent);
}
