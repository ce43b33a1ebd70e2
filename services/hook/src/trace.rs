//! The hook's own spans: one trace per event, whose trace id is the event id, with a root span
//! for the hook run and a child for each message the hook sends (the publish, each context
//! request). The child's id goes into the message's `traceparent`, so the services' spans hang
//! under it.
//!
//! The hook is short-lived and must start in milliseconds, so it keeps no tracing subscriber and
//! no background exporter: spans are plain records, sent in one OTLP/gRPC request at the end of
//! the run, bounded by `MNEME_HOOK_OTLP_TIMEOUT_MS`, and only when `OTEL_EXPORTER_OTLP_ENDPOINT`
//! is set. Attributes name the event (id, session, subject, agent, kind), never its content.

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use proto::Event;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The `service.name` of the hook's spans.
pub const SERVICE_NAME: &str = "mneme-hook";

/// The spans of one hook run, recorded as they end and exported together.
#[derive(Debug)]
pub struct HookTrace {
    trace_id: TraceId,
    root: SpanId,
    started: SystemTime,
    attributes: Vec<KeyValue>,
    ended: Mutex<Vec<SpanData>>,
}

/// A child span in progress; [`HookTrace::end`] records it.
#[derive(Debug)]
pub struct Child {
    id: SpanId,
    name: &'static str,
    kind: SpanKind,
    started: SystemTime,
    attributes: Vec<KeyValue>,
}

impl Child {
    /// The span's own id, for the `traceparent` of the message it sends.
    pub fn id(&self) -> SpanId {
        self.id
    }
}

impl HookTrace {
    /// Start the trace of `event`: the root span begins now.
    pub fn start(event: &Event) -> HookTrace {
        // The event id has the shape of a W3C trace id; an event built without one (never by
        // the adapters) still gets a valid trace.
        let trace_id = TraceId::from_hex(&event.id)
            .ok()
            .filter(|id| *id != TraceId::INVALID)
            .unwrap_or_else(|| {
                TraceId::from_hex(&proto::new_event_id()).unwrap_or(TraceId::INVALID)
            });
        HookTrace {
            trace_id,
            root: new_span_id(),
            started: SystemTime::now(),
            attributes: vec![
                KeyValue::new("event_id", event.id.clone()),
                KeyValue::new("session_id", event.session_id.clone()),
                KeyValue::new("subject", event.subject()),
                KeyValue::new("agent", event.agent().slug()),
                KeyValue::new("kind", event.kind()),
            ],
            ended: Mutex::new(Vec::new()),
        }
    }

    /// A child of the root span, started now, carrying the event's attributes and `subject`
    /// (the NATS subject the child sends to).
    pub fn child(&self, name: &'static str, kind: SpanKind, subject: &str) -> Child {
        let mut attributes = self.attributes.clone();
        if let Some(slot) = attributes
            .iter_mut()
            .find(|kv| kv.key.as_str() == "subject")
        {
            *slot = KeyValue::new("subject", subject.to_owned());
        }
        Child {
            id: new_span_id(),
            name,
            kind,
            started: SystemTime::now(),
            attributes,
        }
    }

    /// The W3C `traceparent` naming `span` as the parent of what the message causes.
    pub fn traceparent(&self, span: SpanId) -> String {
        format!("00-{}-{}-01", self.trace_id, span)
    }

    /// Record `child` as ended now, with `error` as its status when it failed.
    pub fn end(&self, child: Child, error: Option<&str>) {
        let data = self.data(
            child.id,
            self.root,
            child.name,
            child.kind,
            child.started,
            child.attributes,
            error,
        );
        if let Ok(mut ended) = self.ended.lock() {
            ended.push(data);
        }
    }

    /// End the root span with the run's outcome and send every span to `endpoint`, giving up
    /// after `timeout` so an unreachable collector never holds the agent up. Failures are
    /// returned for the hook log; they change nothing else.
    pub async fn export(
        self,
        endpoint: &str,
        timeout: Duration,
        outcome: &str,
    ) -> Result<(), String> {
        let mut attributes = self.attributes.clone();
        attributes.push(KeyValue::new("outcome", outcome.to_owned()));
        let root = self.data(
            self.root,
            SpanId::INVALID,
            "hook",
            SpanKind::Internal,
            self.started,
            attributes,
            None,
        );
        let mut spans = self.ended.into_inner().unwrap_or_default();
        spans.push(root);
        let send = async {
            use opentelemetry_otlp::WithExportConfig as _;
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(timeout)
                .build()
                .map_err(|e| format!("otlp exporter: {e}"))?;
            exporter.set_resource(
                &opentelemetry_sdk::Resource::builder_empty()
                    .with_service_name(SERVICE_NAME)
                    .build(),
            );
            exporter
                .export(spans)
                .await
                .map_err(|e| format!("otlp export to {endpoint}: {e}"))
        };
        match tokio::time::timeout(timeout, send).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "otlp export to {endpoint}: no answer within {timeout:?}"
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn data(
        &self,
        id: SpanId,
        parent: SpanId,
        name: &'static str,
        kind: SpanKind,
        started: SystemTime,
        attributes: Vec<KeyValue>,
        error: Option<&str>,
    ) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: parent,
            parent_span_is_remote: false,
            span_kind: kind,
            name: name.into(),
            start_time: started,
            end_time: SystemTime::now(),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: match error {
                // The reason is mneme's own message (a timeout, a refused connection), never
                // the event's content.
                Some(reason) => Status::error(reason.to_owned()),
                None => Status::Unset,
            },
            instrumentation_scope: InstrumentationScope::builder(SERVICE_NAME).build(),
        }
    }
}

/// A random, valid span id.
fn new_span_id() -> SpanId {
    let mut bytes = [0u8; 8];
    // A failing OS random source leaves the time-based fallback, which is still unique enough
    // for one run's handful of spans.
    if getrandom::fill(&mut bytes).is_err() || bytes == [0; 8] {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        bytes = nanos.max(1).to_be_bytes();
    }
    SpanId::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_id_is_the_event_id_and_children_name_their_own_span() {
        let mut event = hosts::adapter::envelope(proto::Agent::ClaudeCode);
        event.session_id = "s1".to_owned();
        let trace = HookTrace::start(&event);
        let child = trace.child("hook.publish", SpanKind::Producer, "mneme.events.x");
        let parent = trace.traceparent(child.id());
        assert_eq!(parent, format!("00-{}-{}-01", event.id, child.id()));
        trace.end(child, None);
        let ended = trace.ended.lock().unwrap();
        assert_eq!(ended[0].parent_span_id, trace.root);
        assert!(
            ended[0]
                .attributes
                .contains(&KeyValue::new("subject", "mneme.events.x"))
        );
        assert!(
            ended[0]
                .attributes
                .contains(&KeyValue::new("session_id", "s1"))
        );
    }
}
