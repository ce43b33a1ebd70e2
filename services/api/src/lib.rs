//! The api service: mneme's front door, and the only service that speaks HTTP.
//!
//! - REST under `/v1` ([`rest`]), described by the OpenAPI document at `/v1/openapi.json`
//!   ([`openapi`]); `/healthz`, `/readyz` and Prometheus `/metrics`;
//! - HTTP ingest (`POST /v1/events`, [`events`]) publishing to the same JetStream stream as the
//!   hook;
//! - the live stream of what the pipeline writes (`GET /v1/stream`, server-sent events,
//!   [`stream`]);
//! - the MCP server ([`mcp`]) over Streamable HTTP at `/mcp` (and over stdio as `mneme mcp`);
//! - the web dashboard at `/` ([`dashboard`]), plain HTML, CSS and JavaScript embedded in the
//!   binary.
//!
//! It holds no state of its own: questions go to the owning services over NATS request/reply
//! (search, timeline and get to retrieval; archive and delete of sessions to ingest), and lists
//! the services have no request for yet are read from the store, opened read-only, through the
//! read models of the `archive` crate, which also writes and reads the export format.
//! Security is in [`security`]: loopback by default, a token always (`MNEME_API_TOKEN`, or one
//! generated into `$MNEME_HOME/api-token` on first start) for anything exposed or destructive,
//! CORS and writes limited to the dashboard's own origin, a rate limit per client, a body
//! limit, and JSON errors with stable codes ([`error`]).

// The OpenAPI document is one `json!` literal, deeper than the default macro recursion allows.
#![recursion_limit = "512"]

pub mod capabilities;
pub mod collections;
pub mod dashboard;
pub mod error;
pub mod events;
mod extract;
pub mod mcp;
mod metrics;
pub mod openapi;
pub mod rest;
pub mod security;
pub mod stream;
pub mod transfer;

use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, header};
use common::CommonArgs;
use error::{ApiError, ApiResult};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Where the api listens unless told otherwise: loopback, on a port of its own.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7437";

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "api";

/// How long the api waits for a service to answer a request over NATS.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Configuration of the api binary.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "mneme-api",
    version,
    about = "mneme api: REST, live stream, MCP, dashboard"
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// The settings specific to the api, also flattened into `mneme up`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Address to listen on. Beyond loopback, every request needs the token.
    #[arg(long = "api-addr", env = "MNEME_API_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: SocketAddr,

    /// Bearer token for write and destructive endpoints and MCP (always), and for every
    /// endpoint when the api listens beyond loopback. Unset or empty: the token in
    /// `$MNEME_HOME/api-token`, generated on first start (`mneme token` prints it).
    #[arg(long = "api-token", env = "MNEME_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Requests a minute one client address may make (0: unlimited).
    #[arg(
        long = "api-rate-limit",
        env = "MNEME_API_RATE_LIMIT",
        default_value_t = 1200
    )]
    pub rate_per_minute: u32,

    /// Largest request body accepted, in bytes.
    #[arg(long = "api-max-body-bytes", env = "MNEME_API_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,

    /// Extra origins (comma-separated, for example a reverse proxy's `https://mneme.example`)
    /// whose pages may call the api, beside the dashboard's own.
    #[arg(long = "api-origins", env = "MNEME_API_ORIGINS", value_delimiter = ',')]
    pub origins: Vec<String>,

    /// Live streams (`/v1/stream`) open at once, from all clients together; each holds NATS
    /// subscriptions and a connection, so they are bounded.
    #[arg(
        long = "api-max-streams",
        env = "MNEME_API_MAX_STREAMS",
        default_value_t = 64
    )]
    pub max_streams: usize,

    /// Live streams open at once from one client address.
    #[arg(
        long = "api-max-streams-per-address",
        env = "MNEME_API_MAX_STREAMS_PER_ADDRESS",
        default_value_t = 8
    )]
    pub max_streams_per_address: usize,

    /// Addresses of reverse proxies in front of the api (comma-separated): from them, the client
    /// is the address `X-Forwarded-For` names, for the rate limit and the stream caps. From any
    /// other address the header is ignored, so a client cannot pick the address it is counted as.
    #[arg(
        long = "api-trusted-proxies",
        env = "MNEME_API_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<std::net::IpAddr>,

    /// Names the api is reached by besides `localhost` and IP addresses (comma-separated, such
    /// as a team box's `devbox`): a request naming any other host in its `Host` header is
    /// refused, so a web page whose name was rebound to this machine's address cannot read
    /// memory through the browser. The hosts of `MNEME_API_ORIGINS` count too.
    #[arg(long = "api-hosts", env = "MNEME_API_HOSTS", value_delimiter = ',')]
    pub hosts: Vec<String>,
}

impl Default for ApiArgs {
    fn default() -> ApiArgs {
        ApiArgs {
            addr: DEFAULT_ADDR.parse().expect("the default address parses"),
            token: None,
            rate_per_minute: 1200,
            max_body_bytes: 1 << 20,
            origins: Vec::new(),
            max_streams: 64,
            max_streams_per_address: 8,
            trusted_proxies: Vec::new(),
            hosts: Vec::new(),
        }
    }
}

impl ApiArgs {
    /// The token set by `MNEME_API_TOKEN` (or `--api-token`), trimmed; empty means unset, as
    /// compose passes an unset variable on as an empty one.
    pub fn setting_token(&self) -> Option<&str> {
        self.token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    /// Refuse a token setting anybody could guess: shorter than 16 characters, or a
    /// placeholder such as the example in `.env.example`.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(token) = self.setting_token() {
            security::check_strength(token).map_err(|weak| {
                anyhow::anyhow!("MNEME_API_TOKEN {weak}: {}", security::TOKEN_HINT)
            })?;
        }
        Ok(())
    }

    /// The token the api answers to: the setting's, or the token file's (written first when
    /// there is none).
    pub fn resolve_token(&self, common: &CommonArgs) -> anyhow::Result<security::ApiToken> {
        security::ApiToken::resolve(self.setting_token(), &common.api_token_path())
    }
}

/// What every handler shares. Nothing here is memory: that lives with the services.
pub struct State {
    pub nats: async_nats::Client,
    /// What requests are checked against; `None` only for `mneme mcp` over stdio, which serves
    /// no HTTP.
    pub token: Option<security::ApiToken>,
    /// Whether the api listens on loopback only.
    pub loopback: bool,
    pub origins: Vec<axum::http::HeaderValue>,
    pub limiter: security::RateLimiter,
    /// The live streams open, in all and per client address.
    pub streams: security::StreamSlots,
    /// Reverse proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Host names requests may be addressed to besides `localhost` and IP addresses, lowercase.
    pub hosts: Vec<String>,
    pub metrics: metrics::Metrics,
    pub sanitizer: sanitize::Sanitizer,
    pub shutdown: CancellationToken,
    pub started: Instant,
    db_path: PathBuf,
    /// Opened on first use, read-only: the api may start before any service created the store.
    store: tokio::sync::Mutex<Option<store::Store>>,
}

impl State {
    /// The store's read-only pool, opening it on first use.
    pub async fn pool(&self) -> ApiResult<sqlx::SqlitePool> {
        let mut store = self.store.lock().await;
        if let Some(store) = &*store {
            return Ok(store.pool().clone());
        }
        match store::Store::open_read_only(&self.db_path).await {
            Ok(opened) => {
                let pool = opened.pool().clone();
                *store = Some(opened);
                Ok(pool)
            }
            Err(error) => {
                tracing::warn!(%error, "store not readable yet");
                Err(ApiError::unavailable(
                    "the store is not there yet: is ingest running?",
                ))
            }
        }
    }

    /// Bytes the store takes on disk.
    pub async fn store_size(&self) -> u64 {
        self.store
            .lock()
            .await
            .as_ref()
            .map_or(0, store::Store::size_bytes)
    }

    /// Ask `service` over NATS, with the current trace in the headers, and decode its reply.
    pub async fn ask<R: proto::Message + Default>(
        &self,
        service: &str,
        subject: &str,
        request: &impl proto::Message,
    ) -> ApiResult<R> {
        ask(&self.nats, service, subject, request).await
    }

    /// [`State::ask`] with a wait of its own, for a request that waits on something slower
    /// (a search reworded by an LLM).
    pub async fn ask_within<R: proto::Message + Default>(
        &self,
        service: &str,
        subject: &str,
        request: &impl proto::Message,
        timeout: Duration,
    ) -> ApiResult<R> {
        common::nats::ask_service(&self.nats, "api", service, subject, request, timeout)
            .await
            .map_err(|error| asked_error(service, error))
    }
}

/// Ask `service` over NATS, with the current trace in the headers, and decode its reply; a
/// service that does not answer is a 503 naming it.
pub async fn ask<R: proto::Message + Default>(
    nats: &async_nats::Client,
    service: &str,
    subject: &str,
    request: &impl proto::Message,
) -> ApiResult<R> {
    common::nats::ask_service(nats, "api", service, subject, request, ASK_TIMEOUT)
        .await
        .map_err(|error| asked_error(service, error))
}

/// A service that does not answer is a 503 naming it; an answer that does not read, a 500.
fn asked_error(service: &str, error: common::nats::AskError) -> ApiError {
    match error {
        common::nats::AskError::Request(error) => {
            ApiError::unavailable(common::nats::unanswered(service, &error))
        }
        unreadable => ApiError::internal(&format!("reading {service}'s reply"), unreadable),
    }
}

/// Build the state for an api listening on `addr`, with the token setting only (no token file:
/// what `mneme mcp` over stdio uses).
pub fn state(
    nats: async_nats::Client,
    common: &CommonArgs,
    args: &ApiArgs,
    addr: SocketAddr,
    shutdown: CancellationToken,
) -> anyhow::Result<Arc<State>> {
    let token = args.setting_token().map(security::ApiToken::fixed);
    state_with(nats, common, args, addr, shutdown, token)
}

fn state_with(
    nats: async_nats::Client,
    common: &CommonArgs,
    args: &ApiArgs,
    addr: SocketAddr,
    shutdown: CancellationToken,
    token: Option<security::ApiToken>,
) -> anyhow::Result<Arc<State>> {
    Ok(Arc::new(State {
        nats,
        token,
        loopback: addr.ip().is_loopback(),
        origins: security::origins(addr, &args.origins),
        limiter: security::RateLimiter::new(args.rate_per_minute),
        streams: security::StreamSlots::new(args.max_streams, args.max_streams_per_address),
        trusted_proxies: args.trusted_proxies.clone(),
        hosts: security::host_names(&args.hosts, &args.origins),
        metrics: metrics::Metrics::default(),
        sanitizer: sanitize::Sanitizer::new(&sanitize::Config::default())
            .context("building the sanitizer")?,
        shutdown,
        started: Instant::now(),
        db_path: common.db_path(),
        store: tokio::sync::Mutex::new(None),
    }))
}

/// Every route, with the security, metrics and limit layers.
pub fn router(state: Arc<State>, max_body_bytes: usize) -> Router {
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::AllowOrigin::list(state.origins.clone()))
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .max_age(Duration::from_secs(600));
    rest::routes()
        .merge(collections::routes())
        .merge(capabilities::routes())
        .merge(transfer::routes())
        .merge(dashboard::routes())
        .nest_service("/mcp", mcp::http_service(state.clone()))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .fallback(security::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            security::guard,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(cors)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// A handler that panicked answers like any other internal error, with nothing of the panic.
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    ApiError::internal("answering", "a handler panicked").into_response()
}

/// Listen on the configured address and serve until `shutdown` is cancelled.
pub async fn run(
    common: CommonArgs,
    args: ApiArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    args.check()?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    serve(common, args, listener, shutdown).await
}

/// Serve on a listener already bound (tests bind port 0) until `shutdown` is cancelled.
pub async fn serve(
    common: CommonArgs,
    args: ApiArgs,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    args.check()?;
    let addr = listener.local_addr()?;
    // Before NATS: a refused token stops the api at once, with the reason.
    let token = args.resolve_token(&common)?;
    if let security::TokenSource::File {
        path,
        generated: true,
    } = token.source()
    {
        // Shown once, when it is made, the way a notebook server shows its token: whoever
        // started the api can open the dashboard from its log. A token from the setting is
        // never logged, and neither is this one again (`mneme token` prints it).
        tracing::info!(path = %path.display(), "generated the api token (`mneme token` prints it, `mneme token rotate` replaces it)");
        tracing::info!(
            "dashboard: {}#token={}",
            security::dashboard_url(addr),
            token.current()
        );
    }
    let client = common::nats::connect(&common, SERVICE, Duration::from_secs(30)).await?;
    let state = state_with(
        client.clone(),
        &common,
        &args,
        addr,
        shutdown.clone(),
        Some(token),
    )?;
    let counters = Arc::new(common::health::Counters::default());
    counters.set_detail(format!("http://{addr}"));
    let health = tokio::spawn(common::health::serve(
        client.clone(),
        SERVICE,
        counters,
        shutdown.clone(),
    ));
    tracing::info!(%addr, "api listening");
    let app = router(state.clone(), args.max_body_bytes);
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.clone().cancelled_owned())
    .await;
    health.abort();
    let _ = client.drain().await;
    if let Some(store) = state.store.lock().await.take() {
        store.close().await;
    }
    tracing::info!("api stopped");
    served.context("serving http")
}
