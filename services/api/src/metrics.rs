//! Request counters and latencies, rendered in the Prometheus text format at `/metrics`.

use crate::State;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// (method, route, status): what requests are counted by.
type RequestKey = (String, String, u16);

/// What the api counts.
#[derive(Default)]
pub struct Metrics {
    /// (method, route, status) → (requests, seconds spent).
    requests: Mutex<BTreeMap<RequestKey, (u64, f64)>>,
    /// Live-stream clients connected now.
    pub stream_clients: AtomicI64,
    /// Events published through `POST /v1/events` and MCP `save_memory`.
    pub events_published: AtomicI64,
}

impl Metrics {
    fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        let entry = requests
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default();
        entry.0 += 1;
        entry.1 += seconds;
    }

    /// The Prometheus text exposition of everything counted, plus `extra` gauges.
    pub fn render(&self, extra: &[(&str, &str, i64)]) -> String {
        let mut out = String::new();
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str("# HELP mneme_api_requests_total HTTP requests answered, by route and status.\n# TYPE mneme_api_requests_total counter\n");
        for ((method, route, status), (count, _)) in requests.iter() {
            let _ = writeln!(
                out,
                "mneme_api_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {count}",
                escape(route)
            );
        }
        out.push_str("# HELP mneme_api_request_seconds_sum Time spent answering, by route.\n# TYPE mneme_api_request_seconds_sum counter\n");
        let mut by_route: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
        for ((_, route, _), (count, seconds)) in requests.iter() {
            let entry = by_route.entry(route).or_default();
            entry.0 += count;
            entry.1 += seconds;
        }
        for (route, (_, seconds)) in &by_route {
            let _ = writeln!(
                out,
                "mneme_api_request_seconds_sum{{route=\"{}\"}} {seconds:.6}",
                escape(route)
            );
        }
        out.push_str("# HELP mneme_api_request_seconds_count Requests timed, by route.\n# TYPE mneme_api_request_seconds_count counter\n");
        for (route, (count, _)) in &by_route {
            let _ = writeln!(
                out,
                "mneme_api_request_seconds_count{{route=\"{}\"}} {count}",
                escape(route)
            );
        }
        let gauges = [
            (
                "mneme_api_stream_clients",
                "Live-stream clients connected.",
                self.stream_clients.load(Ordering::Relaxed),
            ),
            (
                "mneme_api_events_published_total",
                "Events published to the write path by the api.",
                self.events_published.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, value) in gauges.iter().copied().chain(extra.iter().copied()) {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Count and time every request under the route that matched it (never the raw path, so ids
/// and junk paths cannot blow the label set up).
pub async fn track(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let response = next.run(request).await;
    state.metrics.record(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}
