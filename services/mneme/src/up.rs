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

    #[command(flatten)]
    retrieval: retrieval::RetrievalArgs,

    #[command(flatten)]
    compressor: compressor::CompressorArgs,

    #[command(flatten)]
    pattern: pattern::PatternArgs,

    #[command(flatten)]
    api: api::ApiArgs,

    /// The nats-server binary to start when `MNEME_NATS_URL` is not set.
    #[arg(long, env = "MNEME_NATS_SERVER")]
    nats_server: Option<PathBuf>,

    /// Port of the local nats-server started when `MNEME_NATS_URL` is not set.
    #[arg(long, env = "MNEME_NATS_PORT", default_value_t = 4222)]
    nats_port: u16,
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let UpArgs {
        mut common,
        ingest: ingest_args,
        retrieval: retrieval_args,
        compressor: compressor_args,
        pattern: pattern_args,
        api: api_args,
        nats_server,
        nats_port,
    } = args;
    let _telemetry =
        common::telemetry::init("mneme", &common.log_format, common.otel_endpoint.as_deref());
    // Checked before anything starts, so a refused api setting stops `up` with its reason.
    api_args.check()?;
    let shutdown = common::shutdown::on_signals();

    let url_configured = std::env::var_os("MNEME_NATS_URL").is_some_and(|v| !v.is_empty())
        || common.nats_url != proto::defaults::NATS_URL;
    // The api's port is claimed before anything starts, so a taken port stops `up` with a
    // message saying what to do, before the banner and before a server is started for nothing.
    let listener = crate::ports::bind_api(api_args.addr).await?;
    let mut local = None;
    if !url_configured {
        crate::ports::check_nats(nats_port)?;
        let Some(binary) = nats_server::find(nats_server.as_deref()) else {
            anyhow::bail!("{}", nats_server::INSTALL_HINT);
        };
        let store_dir = common.home_dir().join("nats");
        let server = LocalNats::start(&binary, nats_port, &store_dir).await?;
        common.nats_url = server.url.clone();
        tracing::info!(url = %server.url, store = %store_dir.display(), "started local nats-server");
        local = Some(server);
    }
    // Formatted first and written once, and a failed write ignored: a reader that takes only
    // the first line and closes the pipe must not make `up` fail (println! writes the pieces of
    // its format one by one, and panics on a closed pipe).
    let banner = format!(
        "mneme is up: nats {}, store {}\napi and dashboard on http://{} (MCP at /mcp)\nhooks publish to {}; stop with ctrl-c\n",
        common.nats_url,
        common.db_path().display(),
        api_args.addr,
        common.nats_url
    );
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(banner.as_bytes());
        let _ = stdout.flush();
    }

    tokio::spawn(drain_spool(common.nats_url.clone(), shutdown.clone()));
    let result = tokio::try_join!(
        ingest::run(common.clone(), ingest_args, shutdown.clone()),
        retrieval::run(common.clone(), retrieval_args, shutdown.clone()),
        compressor::run(common.clone(), compressor_args, shutdown.clone()),
        pattern::run(common.clone(), pattern_args, shutdown.clone()),
        api::serve(common.clone(), api_args, listener, shutdown.clone()),
    );
    // Whichever way the services ended, the others must stop too.
    shutdown.cancel();
    if let Some(server) = local {
        server.stop().await;
    }
    result.map(|_| ())
}

/// Replay this machine's hook spool every few seconds, so nothing waits for the next hook run.
async fn drain_spool(nats_url: String, shutdown: tokio_util::sync::CancellationToken) {
    let mut config = mneme_hook::config::HookConfig::from_env();
    config.nats_url = nats_url;
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match mneme_hook::client::drain_spool(&config).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(replayed = n, "replayed spooled hook events"),
            Err(error) => tracing::debug!(%error, "spool replay failed; will retry"),
        }
    }
}
