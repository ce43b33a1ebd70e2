//! `mneme up`: every service in one process, over a real NATS server.
//!
//! It prints where the dashboard is, with its token in the address's fragment (which a browser
//! never sends to a server), and a line when every service answers its health probe.

use crate::nats_server::{self, LocalNats};
use common::CommonArgs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    // The api's token, made now when there is none (so the banner can show it; the api then
    // finds it in the file and does not log it again), before anything is started that an
    // unwritable home would leave behind.
    common.secure_home()?;
    let token = api_args.resolve_token(&common)?;
    let started = Instant::now();
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
        // The server admits only mneme's identities, each with its own permissions: made on
        // the first start, owner-only, and used by every part of this process, by the hooks
        // and by the command line on this machine. Other credentials the environment names are
        // for other servers.
        let keys = common.nats_keys_dir();
        let users = common::access::ensure_keys(&keys)?;
        let store_dir = common.home_dir().join("nats");
        let team = common::team::Team::load(&common.home_dir())?;
        let server = LocalNats::start(
            &binary,
            nats_port,
            &store_dir,
            &common::access::authorization(&users),
            team.as_ref(),
        )
        .await?;
        if let Some(team) = &team {
            tracing::info!(member = %team.member, hub = %team.hub.join(","), "a leaf node of the team's hub");
        }
        common.nats_url = server.url.clone();
        common.nats_token = None;
        common.nats_nkey = None;
        common.nats_creds = None;
        common.nats_keys = Some(keys);
        tracing::info!(url = %server.url, store = %store_dir.display(), "started local nats-server");
        local = Some(tokio::spawn(supervise_nats(
            Supervised {
                server,
                binary,
                port: nats_port,
                store_dir,
                authorization: common::access::authorization(&users),
                home: common.home_dir(),
                team,
            },
            shutdown.clone(),
        )));
    }
    let dashboard = api::security::dashboard_url(api_args.addr);
    let dashboard = match token.source() {
        // The user's own terminal, as a notebook server shows its token. A token from the
        // setting is the user's to know and is never printed.
        api::security::TokenSource::File { .. } => {
            format!("{dashboard}#token={}", token.current())
        }
        api::security::TokenSource::Setting => {
            format!("{dashboard} (with the token of MNEME_API_TOKEN)")
        }
    };
    say(&format!(
        "mneme is up: nats {}, store {}\ndashboard: {dashboard}\napi on http://{} (MCP at /mcp, with the token: `mneme token` prints it)\nhooks publish to {}; stop with ctrl-c\n",
        common::nats::shown(&common.nats_url),
        common.db_path().display(),
        api_args.addr,
        common::nats::shown(&common.nats_url)
    ));

    tokio::spawn(drain_spool(common.clone(), shutdown.clone()));
    tokio::spawn(announce_ready(common.clone(), started, shutdown.clone()));
    tokio::spawn(crate::team::keep(common.clone(), shutdown.clone()));
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
        // The supervisor stops the server once it sees the shutdown.
        let _ = server.await;
    }
    result.map(|_| ())
}

/// Write `text` to stdout whole, ignoring a failed write: a reader that takes only the first
/// line and closes the pipe must not make `up` fail (println! writes the pieces of its format
/// one by one, and panics on a closed pipe).
fn say(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Say when every service answers its health probe, which each does only once it takes work:
/// until then a hook's event waits in a stream or the spool, and a search may find nothing.
/// Said once; while it takes long, the log names the services still silent.
async fn announce_ready(
    common: CommonArgs,
    started: Instant,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let client = tokio::select! {
        _ = shutdown.cancelled() => return,
        client = common::nats::connect(&common, "up", Duration::from_secs(60)) => match client {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(error = format!("{error:#}"), "cannot tell when mneme is ready");
                return;
            }
        },
    };
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut warned = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let probes = crate::status::SERVICES.map(|service| {
            let client = &client;
            async move {
                let answer = common::nats::request::<proto::HealthReply>(
                    client,
                    &proto::subjects::health_subject(service),
                    &proto::HealthRequest {},
                    Duration::from_secs(1),
                )
                .await;
                (service, answer.ok().filter(|health| health.ok))
            }
        });
        let answers = futures::future::join_all(probes).await;
        let silent: Vec<&str> = answers
            .iter()
            .filter(|(_, health)| health.is_none())
            .map(|(service, _)| *service)
            .collect();
        if silent.is_empty() {
            // A missing model does not stop mneme (full-text search answers), but a person must
            // learn it here, with what to do, rather than from search results that feel off.
            let semantic = answers
                .iter()
                .filter_map(|(service, health)| Some((service, health.as_ref()?)))
                .find(|(service, _)| **service == "retrieval")
                .and_then(|(_, health)| health.detail.strip_prefix("full-text only: "))
                .map(|reason| format!("semantic search is off: {reason}\n"))
                .unwrap_or_default();
            say(&format!(
                "mneme is ready: {} answer (after {:.1}s)\n{semantic}",
                crate::status::SERVICES.join(", "),
                started.elapsed().as_secs_f64()
            ));
            crate::capabilities::rescan_at_start(common).await;
            return;
        }
        if !warned && started.elapsed() > Duration::from_secs(60) {
            warned = true;
            tracing::warn!(waiting_for = silent.join(", "), "mneme is not ready yet");
        }
    }
}

/// Replay this machine's hook spool every few seconds, so nothing waits for the next hook run.
async fn drain_spool(common: common::CommonArgs, shutdown: tokio_util::sync::CancellationToken) {
    let mut config = mneme_hook::config::HookConfig::from_env();
    config.nats_url = common.nats_url.clone();
    // Replayed as the hooks would have published: with the hook's identity.
    if common.nats_keys.is_some() {
        config.nats_token = None;
        config.nats_creds = None;
        config.nats_nkey = common::access::seed_in(&common.nats_keys_dir(), "hook");
    }
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

/// The local nats-server `mneme up` owns, with what it was started from.
struct Supervised {
    server: LocalNats,
    binary: PathBuf,
    port: u16,
    store_dir: PathBuf,
    authorization: String,
    home: PathBuf,
    team: Option<common::team::Team>,
}

/// How often the team file is looked at for a change of the leaf link.
const TEAM_FILE_CHECK: Duration = Duration::from_secs(2);

/// What of the team file the local server's configuration holds.
type Link = Option<(Vec<String>, String, Option<common::team::Credentials>)>;

fn link_of(team: Option<&common::team::Team>) -> Link {
    team.map(|t| (t.hub.clone(), t.member.clone(), t.credentials.clone()))
}

/// Keep the local nats-server in step with the team file: joining, leaving or changing the hub
/// or the credentials restarts it with the new leaf link and JetStream domain (which a running
/// server cannot take), on the same port and store; the services and hooks reconnect by
/// themselves, and what they publish meanwhile waits in their retries and the spool. Sharing
/// or unsharing a project needs no restart. Settings the server refuses are said once, and it
/// runs on with the ones it had. Stops the server at shutdown.
async fn supervise_nats(nats: Supervised, shutdown: tokio_util::sync::CancellationToken) {
    let Supervised {
        server,
        binary,
        port,
        store_dir,
        authorization,
        home,
        team,
    } = nats;
    let mut server = Some(server);
    let mut running = team;
    let mut tried = link_of(running.as_ref());
    let mut tick = tokio::time::interval(TEAM_FILE_CHECK);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let team = match common::team::Team::load(&home) {
            Ok(team) => team,
            Err(error) => {
                tracing::debug!(error = %format!("{error:#}"), "team file unreadable; the leaf link stays as it is");
                continue;
            }
        };
        let wanted = link_of(team.as_ref());
        if wanted == tried {
            continue;
        }
        tried = wanted;
        tracing::info!(
            member = team.as_ref().map_or("", |t| t.member.as_str()),
            "the team's hub settings changed: restarting the local nats-server"
        );
        if let Some(old) = server.take() {
            old.stop().await;
        }
        let started = LocalNats::start(&binary, port, &store_dir, &authorization, team.as_ref());
        match started.await {
            Ok(new) => {
                server = Some(new);
                running = team;
                tracing::info!("local nats-server restarted with the team's settings");
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "the new team settings cannot be used; the local nats-server runs on with the ones it had");
                match LocalNats::start(&binary, port, &store_dir, &authorization, running.as_ref())
                    .await
                {
                    Ok(old) => server = Some(old),
                    Err(error) => {
                        tracing::error!(error = %format!("{error:#}"), "cannot restart the local nats-server");
                    }
                }
            }
        }
    }
    if let Some(server) = server {
        server.stop().await;
    }
}
