use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = ingest::Args::parse();
    let _telemetry = common::telemetry::init(
        ingest::SERVICE,
        &args.common.log_format,
        args.common.otel_endpoint.as_deref(),
    );
    let shutdown = common::shutdown::on_signals();
    ingest::run(args.common, args.ingest, shutdown).await
}
