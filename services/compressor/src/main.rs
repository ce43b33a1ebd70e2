use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = compressor::Args::parse();
    let _telemetry = common::telemetry::init(
        compressor::SERVICE,
        &args.common.log_format,
        args.common.otel_endpoint.as_deref(),
    );
    let shutdown = common::shutdown::on_signals();
    compressor::run(args.common, args.compressor, shutdown).await
}
