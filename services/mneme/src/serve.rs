//! `mneme serve <service>`: one service in this process, exactly as its own binary runs it.
//!
//! The container image ships `mneme` and `mneme-hook` only: each service binary links its own
//! copy of tokio, NATS, SQLite and the model runtime, and seven such copies made the image
//! more than twice the size of one.

use clap::Subcommand;

/// The service to run; its arguments and environment variables are those of its own binary.
#[derive(Debug, Subcommand)]
pub enum Service {
    /// Consume hook events into the store (as `mneme-ingest`).
    Ingest(ingest::Args),
    /// Index, embed and answer searches and context requests (as `mneme-retrieval`).
    Retrieval(retrieval::Args),
    /// Distil sessions into observations, summaries and checkpoints (as `mneme-compressor`).
    Compressor(compressor::Args),
    /// Record what recurs across sessions (as `mneme-pattern`).
    Pattern(pattern::Args),
    /// Serve REST, the live stream, MCP and the dashboard (as `mneme-api`).
    Api(api::Args),
}

/// Run `service` until SIGINT or SIGTERM.
pub async fn run(service: Service) -> anyhow::Result<()> {
    let shutdown = common::shutdown::on_signals();
    let (name, common) = match &service {
        Service::Ingest(args) => (ingest::SERVICE, &args.common),
        Service::Retrieval(args) => (retrieval::SERVICE, &args.common),
        Service::Compressor(args) => (compressor::SERVICE, &args.common),
        Service::Pattern(args) => (pattern::SERVICE, &args.common),
        Service::Api(args) => (api::SERVICE, &args.common),
    };
    let _telemetry =
        common::telemetry::init(name, &common.log_format, common.otel_endpoint.as_deref());
    match service {
        Service::Ingest(args) => ingest::run(args.common, args.ingest, shutdown).await,
        Service::Retrieval(args) => retrieval::run(args.common, args.retrieval, shutdown).await,
        Service::Compressor(args) => compressor::run(args.common, args.compressor, shutdown).await,
        Service::Pattern(args) => pattern::run(args.common, args.pattern, shutdown).await,
        Service::Api(args) => api::run(args.common, args.api, shutdown).await,
    }
}
