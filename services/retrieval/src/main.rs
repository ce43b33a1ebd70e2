use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = retrieval::Args::parse();
    let _telemetry = common::telemetry::init(
        retrieval::SERVICE,
        &args.common.log_format,
        args.common.otel_endpoint.as_deref(),
    );
    let shutdown = common::shutdown::on_signals();
    retrieval::run(args.common, args.retrieval, shutdown).await
}
