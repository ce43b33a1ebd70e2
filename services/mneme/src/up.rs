//! `mneme up`: every service in one process, over a real NATS server.

use crate::nats_server::{self, LocalNats};
use common::CommonArgs;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    common: CommonArgs,

    #[command(flatten)]
    ingest: ingest::IngestArgs,

    /// The nats-server binary to start when `MNEME_NATS_URL` is not set.
    #[arg(long, env = "MNEME_NATS_SERVER")]
    nats_server: Option<PathBuf>,

    /// Port of the local nats-server started when `MNEME_NATS_URL` is not set.
    #[arg(long, env = "MNEME_NATS_PORT", default_value_t = 4222)]
    nats_port: u16,
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let UpArgs { mut common, ingest: ingest_args, nats_server, nats_port } = args;
    let _telemetry = common::telemetry::init("mneme", &common.log_format, common.otel_endpoint.as_deref());
    let shutdown = common::shutdown::on_signals();

    let url_configured = std::env::var_os("MNEME_NATS_URL").is_some_and(|v| !v.is_empty())
        || common.nats_url != proto::defaults::NATS_URL;
    let mut local = None;
    if !url_configured {
        let Some(binary) = nats_server::find(nats_server.as_deref()) else {
            anyhow::bail!("{}", nats_server::INSTALL_HINT);
        };
        let store_dir = common.home_dir().join("nats");
        let server = LocalNats::start(&binary, nats_port, &store_dir).await?;
        common.nats_url = server.url.clone();
        tracing::info!(url = %server.url, store = %store_dir.display(), "started local nats-server");
        local = Some(server);
    }
    println!("mneme is up: nats {}, store {}", common.nats_url, common.db_path().display());
    println!("hooks publish to {}; stop with ctrl-c", common.nats_url);

    let result = tokio::try_join!(
        ingest::run(common.clone(), ingest_args, shutdown.clone()),
        retrieval::run(common.clone(), shutdown.clone()),
    );
    // Whichever way the services ended, the others must stop too.
    shutdown.cancel();
    if let Some(server) = local {
        server.stop().await;
    }
    result.map(|_| ())
}
