//! Logging and tracing: a `tracing` subscriber writing to stderr (text or JSON), plus an
//! OpenTelemetry OTLP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! Logs go to stderr so that a process whose stdout is a protocol (MCP over stdio, a hook) is
//! never corrupted by them.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::{EnvFilter, Layer, layer::SubscriberExt, util::SubscriberInitExt};

/// Flushes and shuts the span exporter down when dropped, so no span is lost at exit.
#[must_use = "dropping the guard immediately shuts telemetry down"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("mneme: flushing traces failed: {error}");
        }
    }
}

/// Install the global subscriber for `service`. Safe to call more than once: later calls (for
/// example several services in one process, or tests) keep the first subscriber.
pub fn init(service: &str, log_format: &str, otel_endpoint: Option<&str>) -> TelemetryGuard {
    let filter = || {
        EnvFilter::try_from_env("MNEME_LOG")
            .or_else(|_| EnvFilter::try_from_default_env())
            .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,async_nats=warn"))
    };
    let fmt = if log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .boxed()
    };

    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );

    // Spans always get W3C ids, so trace context is carried across NATS even when nothing is
    // exported; the exporter is added only when an endpoint is configured.
    let exporter =
        otel_endpoint
            .filter(|e| !e.is_empty())
            .and_then(|endpoint| match build_exporter(endpoint) {
                Ok(exporter) => Some(exporter),
                Err(error) => {
                    eprintln!("mneme: opentelemetry export disabled: {error}");
                    None
                }
            });
    let mut builder = SdkTracerProvider::builder().with_resource(
        opentelemetry_sdk::Resource::builder()
            .with_service_name(service_name(service))
            .build(),
    );
    if let Some(exporter) = exporter {
        builder = builder.with_batch_exporter(exporter);
    }
    let provider = Some(builder.build());
    // Spans follow their own filter, not `MNEME_LOG`: a quieter log must not drop the spans
    // whose ids carry the trace across NATS (a disabled span injects no `traceparent`). The
    // exporter's own HTTP/2 stack stays out, so exporting never produces spans to export.
    let otel_layer = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(service.to_owned()))
            .with_filter(EnvFilter::new(
                "info,sqlx=warn,async_nats=warn,h2=off,hyper=off,tonic=off,tower=off",
            ))
    });

    let installed = tracing_subscriber::registry()
        .with(fmt)
        .with(otel_layer)
        .try_init()
        .is_ok();
    if installed && let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    TelemetryGuard {
        provider: if installed { provider } else { None },
    }
}

/// The `service.name` of a service's spans: `mneme-<service>`, and `mneme` itself for `mneme up`.
pub fn service_name(service: &str) -> String {
    if service == "mneme" || service.starts_with("mneme-") {
        service.to_owned()
    } else {
        format!("mneme-{service}")
    }
}

fn build_exporter(endpoint: &str) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    use opentelemetry_otlp::WithExportConfig;
    Ok(opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()?)
}
