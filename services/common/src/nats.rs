//! NATS connection and W3C trace context in message headers.
//!
//! The hook starts a trace and writes `traceparent` into the headers of the event it publishes;
//! every consumer makes that context the parent of its handling span, so one hook event is one
//! trace across services.

use anyhow::Context as _;
use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector};
use std::time::Duration;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::CommonArgs;

/// Connection options naming the client `mneme-<name>`, with whichever authentication the
/// arguments give (token, NKey seed file, credentials file), else the seed of the client's role
/// in the keys directory when it holds one; replies come to the role's own inbox prefix, the
/// only one its permissions let it read.
pub async fn options(args: &CommonArgs, name: &str) -> anyhow::Result<async_nats::ConnectOptions> {
    let role = proto::access::Role::of_client(name);
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("mneme-{name}"))
        .custom_inbox_prefix(role.inbox_prefix());
    if let Some(token) = &args.nats_token {
        options = options.token(token.clone());
    }
    let configured =
        args.nats_token.is_some() || args.nats_nkey.is_some() || args.nats_creds.is_some();
    let seed = match &args.nats_nkey {
        Some(path) => Some(path.clone()),
        None if !configured => crate::access::seed_in(&args.nats_keys_dir(), name),
        None => None,
    };
    if let Some(path) = &seed {
        options = options.nkey(read_seed(path)?);
    }
    if let Some(creds) = &args.nats_creds {
        options = options
            .credentials_file(creds)
            .await
            .with_context(|| format!("reading nats credentials {}", creds.display()))?;
    }
    Ok(options)
}

/// The NKey seed in a file: its one line, which must be a user seed (`SU…`).
pub(crate) fn read_seed(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the nats nkey seed {}", path.display()))?;
    let seed = text.trim();
    anyhow::ensure!(
        seed.starts_with("SU") && !seed.contains(char::is_whitespace),
        "{} does not hold an nkey user seed (one line starting with SU)",
        path.display()
    );
    Ok(seed.to_owned())
}

/// A NATS URL as logs, errors and `mneme status` may show it: without its password or token.
pub fn shown(url: &str) -> String {
    sanitize::url::without_credentials(url)
}

/// Connect to NATS as `name`, retrying the first connection until `deadline` passes.
///
/// Services start before or alongside the server (compose, `mneme up`), so a refused first
/// connection is normal for a moment; after that the client reconnects by itself.
pub async fn connect(
    args: &CommonArgs,
    name: &str,
    deadline: Duration,
) -> anyhow::Result<async_nats::Client> {
    let started = std::time::Instant::now();
    let options = options(args, name)
        .await?
        .connection_timeout(Duration::from_secs(2))
        .retry_on_initial_connect();
    // `retry_on_initial_connect` makes `connect` return at once and connect in the
    // background; wait for the connection here so callers can rely on it.
    let client = options
        .connect(&args.nats_url)
        .await
        .with_context(|| format!("connecting to nats at {}", shown(&args.nats_url)))?;
    while client.connection_state() != async_nats::connection::State::Connected {
        if started.elapsed() > deadline {
            anyhow::bail!(
                "nats at {} did not accept a connection within {deadline:?}: start mneme with `mneme up` (it runs a local nats-server), or set MNEME_NATS_URL to a server that is running",
                shown(&args.nats_url)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(client)
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }
}

/// Write the current span's trace context into `headers`.
pub fn inject_trace(headers: &mut HeaderMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// Make the trace context carried in `headers`, when there is one, the parent of `span`.
pub fn continue_trace(span: &tracing::Span, headers: Option<&HeaderMap>) {
    let Some(headers) = headers else { return };
    if headers.get(proto::subjects::TRACEPARENT_HEADER).is_none() {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    });
    let _ = span.set_parent(parent);
}

/// Why a request over NATS brought back no reply to read.
#[derive(Debug)]
pub enum AskError {
    /// No reply: nothing listens on the subject, none came in time, or NATS could not carry
    /// the request ([`async_nats::RequestError::kind`] says which).
    Request(async_nats::RequestError),
    /// A reply came, but it does not decode as the message expected.
    Unreadable(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Request(error) => write!(f, "no reply: {error}"),
            AskError::Unreadable(error) => write!(f, "unreadable reply: {error}"),
        }
    }
}

impl std::error::Error for AskError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AskError::Request(error) => Some(error),
            AskError::Unreadable(error) => Some(error.as_ref()),
        }
    }
}

/// Send `message` on `subject` with the current trace context in its headers, and decode the
/// reply as `R`, waiting at most `timeout`.
///
/// The trace context makes the responder's handling part of the caller's trace, so callers
/// that want a span of their own for the request run this inside it.
pub async fn request<R: proto::Message + Default>(
    client: &async_nats::Client,
    subject: &str,
    message: &impl proto::Message,
    timeout: Duration,
) -> Result<R, AskError> {
    let mut headers = HeaderMap::new();
    inject_trace(&mut headers);
    let request = async_nats::Request::new()
        .payload(message.encode_to_vec().into())
        .headers(headers)
        .timeout(Some(timeout));
    let reply = client
        .send_request(subject.to_owned(), request)
        .await
        .map_err(AskError::Request)?;
    R::decode(reply.payload).map_err(|error| AskError::Unreadable(Box::new(error)))
}

/// [`request`] in a span of its own (`ask`, with the caller, the service and the subject), so the responder's
/// handling joins a trace even when no span is open around the call; a request that gets no
/// answer is logged with the service that should have given it.
pub async fn ask_service<R: proto::Message + Default>(
    client: &async_nats::Client,
    caller: &'static str,
    service: &str,
    subject: &str,
    message: &impl proto::Message,
    timeout: Duration,
) -> Result<R, AskError> {
    use tracing::Instrument as _;
    let span = tracing::info_span!("ask", caller, service, subject);
    let result = request(client, subject, message, timeout)
        .instrument(span)
        .await;
    if let Err(AskError::Request(error)) = &result {
        tracing::warn!(%error, caller, service, subject, "request failed");
    }
    result
}

/// Connect with `args` and ask once, for a command that may run while no service does: `None`
/// when NATS cannot be reached within a second, or no reply comes within `timeout`.
pub async fn ask<R: proto::Message + Default>(
    args: &CommonArgs,
    subject: &str,
    message: &impl proto::Message,
    timeout: Duration,
) -> Option<R> {
    let connect = async {
        let options = options(args, "cli").await?;
        anyhow::Ok(options.connect(&args.nats_url).await?)
    };
    let client = tokio::time::timeout(Duration::from_secs(1), connect)
        .await
        .ok()?
        .ok()?;
    request(&client, subject, message, timeout).await.ok()
}

/// Why `responder` gave no reply, in words for a person: it is not running, it was too slow,
/// or NATS itself could not be reached.
pub fn unanswered(responder: &str, error: &async_nats::RequestError) -> String {
    use async_nats::RequestErrorKind as K;
    match error.kind() {
        K::NoResponders => format!("{responder} is not running"),
        K::TimedOut => format!("{responder} did not answer in time"),
        _ => "nats is unreachable".to_owned(),
    }
}
