use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = pattern::Args::parse();
    let _telemetry = common::telemetry::init(
        pattern::SERVICE,
        &args.common.log_format,
        args.common.otel_endpoint.as_deref(),
    );
    let shutdown = common::shutdown::on_signals();
    pattern::run(args.common, args.pattern, shutdown).await
}
