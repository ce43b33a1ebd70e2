use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = api::Args::parse();
    let _telemetry = common::telemetry::init(
        api::SERVICE,
        &args.common.log_format,
        args.common.otel_endpoint.as_deref(),
    );
    let shutdown = common::shutdown::on_signals();
    api::run(args.common, args.api, shutdown).await
}
