//! A test OpenTelemetry collector: a real OTLP/gRPC `TraceService` on a loopback port that keeps
//! every span it receives, flattened to what tests check (trace, ids, name, the `service.name`
//! of its resource, attributes as text).
//!
//! The end-to-end tests point the services and the hook at it through
//! `OTEL_EXPORTER_OTLP_ENDPOINT`; the `otlp-sink` binary serves it on its own for the compose
//! test, printing each span as a JSON line.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One received span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Lowercase hex, as in `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// The `service.name` attribute of the span's resource.
    pub service: String,
    /// Every attribute, its value as text.
    pub attributes: BTreeMap<String, String>,
    /// The status message (empty unless the span failed).
    pub status: String,
}

impl Span {
    /// The span as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "service": self.service,
            "attributes": self.attributes,
            "status": self.status,
        })
    }
}

/// The receiver: every span received so far, and a signal when more arrive.
#[derive(Clone, Default)]
pub struct Sink {
    spans: Arc<Mutex<Vec<Span>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Sink {
    /// Serve OTLP/gRPC on `addr` (port 0 for a free one) until the runtime ends; returns the
    /// sink and the address it listens on.
    pub async fn serve(addr: &str) -> std::io::Result<(Sink, SocketAddr)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let sink = Sink::default();
        let service = TraceServiceServer::new(sink.clone());
        tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
            if let Err(error) = served {
                eprintln!("otlp-sink: serving failed: {error}");
            }
        });
        Ok((sink, local))
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Wait until a new export arrives.
    pub async fn arrived(&self) {
        self.arrived.notified().await;
    }
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            let service = resource.get("service.name").cloned().unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    received.push(Span {
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        service: service.clone(),
                        attributes: attributes(&span.attributes),
                        status: span.status.map(|s| s.message).unwrap_or_default(),
                    });
                }
            }
        }
        self.spans.lock().unwrap().extend(received);
        self.arrived.notify_waiters();
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(text).unwrap_or_default(),
            )
        })
        .collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => hex(b),
        Some(Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(text).collect();
            format!("[{}]", items.join(","))
        }
        Some(Value::KvlistValue(l)) => format!("{:?}", attributes(&l.values)),
        // Values only newer protocol versions send are shown as they decode.
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
