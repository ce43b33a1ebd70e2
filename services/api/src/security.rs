//! Who may call what, and how often: the token, the origin check, CORS and the rate limit.
//!
//! The rules, in order:
//! - `/healthz`, `/readyz` and the dashboard's static files are open (they hold no memory);
//! - anything that writes or deletes (`POST`, `PUT`, `PATCH`, `DELETE` under `/v1`) needs the
//!   token always;
//! - `/mcp` needs the token always: its tools save memories and make collections, and what an
//!   agent is told comes from there, so another user of this machine must not reach it
//!   (agent hosts run `mneme mcp` over stdio, which never passes through here);
//! - everything else needs the token when the api is bound to a non-loopback address;
//! - a browser request from another origin may not write, whatever its credentials.
//!
//! There is always a token ([`ApiToken`]): `MNEME_API_TOKEN` when it is set, else the one in
//! `$MNEME_HOME/api-token`, generated on first start (32 random bytes, mode 0600) and re-read
//! when `mneme token rotate` replaces it, so a running api takes the new one without a restart.

use crate::State;
use crate::error::ApiError;
use anyhow::Context as _;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use std::collections::HashMap;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Nothing,
    /// The token when the api is not on loopback.
    TokenIfExposed,
    /// The token, always.
    Token,
}

fn need(method: &Method, path: &str) -> Need {
    let writes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if path == "/healthz" || path == "/readyz" {
        Need::Nothing
    } else if path == "/mcp" || path.starts_with("/mcp/") {
        Need::Token
    } else if path.starts_with("/v1/") || path == "/metrics" {
        if writes {
            Need::Token
        } else {
            Need::TokenIfExposed
        }
    } else {
        // The dashboard's page and assets: it asks for the token itself when the API needs one.
        Need::Nothing
    }
}

/// Token, origin and rate checks, before any handler runs.
pub async fn guard(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = client_address(&state, &request);
    if let Some(ip) = client {
        // Handlers that count per client (the live stream) read the same address.
        request.extensions_mut().insert(ClientAddress(ip));
    }
    match check(&state, &request, client) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// The address a request is counted as: the peer's, or, when the peer is a trusted reverse
/// proxy, the address it forwarded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// The client's address: the connection's peer, unless the peer is one of the trusted proxies;
/// then the rightmost `X-Forwarded-For` entry that is not a trusted proxy itself (entries to
/// its left were written by the client and prove nothing).
fn client_address(state: &State, request: &Request) -> Option<IpAddr> {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())?;
    if !state.trusted_proxies.contains(&peer) {
        return Some(peer);
    }
    let forwarded = request
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    forwarded
        .iter()
        .rev()
        .filter_map(|entry| entry.parse::<IpAddr>().ok())
        .find(|ip| !state.trusted_proxies.contains(ip))
        .or(Some(peer))
}

fn check(state: &State, request: &Request, peer: Option<IpAddr>) -> Result<(), ApiError> {
    let path = request.uri().path();
    let method = request.method();
    if let Some(host) = requested_host(request)
        && !host_allowed(state, &host)
    {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            format!(
                "this api is not reached by the name {host:?}: add it to MNEME_API_HOSTS if it is this machine's"
            ),
        ));
    }
    if *method == Method::OPTIONS {
        // CORS preflights carry no credentials; the CORS layer answers them.
        return Ok(());
    }
    if path != "/healthz"
        && path != "/readyz"
        && let Some(ip) = peer
        && let Err(wait) = state.limiter.check(ip)
    {
        let mut error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "more than {} requests a minute from this address; retry in {wait}s",
                state.limiter.per_minute
            ),
        );
        error.retry_after = Some(wait);
        return Err(error);
    }
    let writes = !matches!(*method, Method::GET | Method::HEAD);
    if writes
        && let Some(origin) = request.headers().get(header::ORIGIN)
        && !state.origins.iter().any(|o| o == origin)
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "requests that change memory are only accepted from the dashboard's own origin",
        ));
    }
    match need(method, path) {
        Need::Nothing => return Ok(()),
        Need::TokenIfExposed if state.loopback => return Ok(()),
        Need::TokenIfExposed | Need::Token => {}
    }
    // Only the state `mneme mcp` builds for stdio has no token, and it serves no HTTP; should
    // one ever be served, it fails closed.
    let Some(token) = state.token.as_ref() else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "token_required",
            "this endpoint needs the api token, and this api has none",
        ));
    };
    let expected = token.current();
    match presented(request) {
        Some(presented) if same(presented.as_bytes(), expected.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the token does not match the api's token (`mneme token` prints it)",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this endpoint needs the api token: send `authorization: bearer <token>` (`mneme token` prints it)",
        )),
    }
}

/// The token a request carries: `authorization: bearer …`, or `access_token=…` in the query of
/// the live stream, because a browser's EventSource cannot set headers.
fn presented(request: &Request) -> Option<String> {
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    if request.uri().path() == "/v1/stream" {
        let query = request.uri().query()?;
        return query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == "access_token")
            .and_then(|(_, v)| percent_decoded(v));
    }
    None
}

/// A query value with its `%XX` escapes decoded, as a browser's `encodeURIComponent` wrote it;
/// `None` when an escape is broken or the bytes are not UTF-8, so a mangled token is refused
/// rather than compared as written.
fn percent_decoded(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The live streams open, in all and per client address, each bounded.
pub struct StreamSlots {
    pub max: usize,
    pub per_address: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One open stream's place, given back when the stream ends.
pub struct StreamSlot {
    slots: Arc<State>,
    ip: IpAddr,
}

impl StreamSlots {
    pub fn new(max: usize, per_address: usize) -> StreamSlots {
        StreamSlots {
            max,
            per_address,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Take a place for a stream from `ip`, or say why there is none.
    pub fn take(state: &Arc<State>, ip: IpAddr) -> Result<StreamSlot, ApiError> {
        let slots = &state.streams;
        let mut open = slots.open.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(&ip).copied().unwrap_or(0);
        let refused = if mine >= slots.per_address {
            Some(format!(
                "{} live streams are open from this address already, the most one address may hold",
                slots.per_address
            ))
        } else if total >= slots.max {
            Some(format!(
                "{} live streams are open already, the most the api holds",
                slots.max
            ))
        } else {
            None
        };
        if let Some(message) = refused {
            let mut error =
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message);
            error.retry_after = Some(15);
            return Err(error);
        }
        *open.entry(ip).or_insert(0) += 1;
        Ok(StreamSlot {
            slots: state.clone(),
            ip,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .streams
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The host a request is addressed to, without its port: the `Host` header, or the authority
/// of an HTTP/2 request. `None` when it names none (an HTTP/1.0 client), which no browser sends.
fn requested_host(request: &Request) -> Option<String> {
    let authority = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()))?;
    Some(host_of(&authority))
}

/// The host of an authority (`name`, `name:port`, `[v6]`, `[v6]:port`), lowercase.
fn host_of(authority: &str) -> String {
    let authority = authority.trim();
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => authority,
        }
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a request may be addressed to `host`: an IP address (a page cannot rebind an
/// address, only a name), `localhost`, or a name configured for this api. A page on a name the
/// attacker controls, resolved to 127.0.0.1 after it loaded, still sends its own name: refused,
/// so loopback reads without a token stay this machine's.
fn host_allowed(state: &State, host: &str) -> bool {
    host.parse::<IpAddr>().is_ok() || host == "localhost" || state.hosts.iter().any(|h| h == host)
}

/// The names of `MNEME_API_HOSTS` and the hosts of `MNEME_API_ORIGINS`, lowercase.
pub fn host_names(hosts: &[String], origins: &[String]) -> Vec<String> {
    let mut names: Vec<String> = hosts
        .iter()
        .map(|h| host_of(h))
        .chain(origins.iter().filter_map(|origin| {
            let rest = origin.split_once("://").map_or(origin.as_str(), |(_, r)| r);
            let authority = rest.split('/').next()?;
            Some(host_of(authority))
        }))
        .filter(|h| !h.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Compare in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The origins a browser may call the api from: the dashboard's own, under every name the
/// listening address has, plus any configured ones (a reverse proxy's).
pub fn origins(addr: SocketAddr, extra: &[String]) -> Vec<HeaderValue> {
    let port = addr.port();
    let mut names = vec![format!("http://{addr}")];
    if addr.ip().is_loopback() {
        names.push(format!("http://localhost:{port}"));
        names.push(format!("http://127.0.0.1:{port}"));
        names.push(format!("http://[::1]:{port}"));
    }
    names.extend(extra.iter().map(|o| o.trim_end_matches('/').to_owned()));
    names.sort();
    names.dedup();
    names.iter().filter_map(|n| n.parse().ok()).collect()
}

/// A token bucket per client address: `per_minute` requests a minute, in bursts of at most as
/// many. Zero turns limiting off.
pub struct RateLimiter {
    pub per_minute: u32,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> RateLimiter {
        RateLimiter {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one request from `ip`'s bucket; `Err(seconds)` to wait when it is empty.
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let rate = capacity / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > 10_000 {
            // Forget clients whose buckets have refilled, so the map cannot grow without bound.
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * rate < capacity
            });
        }
        let (tokens, at) = buckets.entry(ip).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * rate).min(capacity);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

/// How often a running api looks at the token file for a rotated token: a `stat` at most
/// once a second costs nothing, and `mneme token rotate` takes effect within that second.
const RECHECK: Duration = Duration::from_secs(1);

/// The fewest characters a token may have.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What `mneme token` and the api tell a person who set a token that is refused.
pub const TOKEN_HINT: &str = "unset it to have mneme generate one (`mneme token` prints it), or set a random one (openssl rand -hex 32)";

/// Why a token is refused; callers say which token (the setting or the file) it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WeakToken {
    #[error("must be at least {MIN_TOKEN_CHARS} characters")]
    TooShort,
    #[error("must not contain spaces or control characters")]
    Whitespace,
    #[error("is a placeholder, not a secret")]
    Placeholder,
}

/// Refuse a token anybody could guess: too short, or a placeholder (the example of
/// `.env.example`, `change-me…`, words such as `secret`, `password`, `token` and `example` on
/// their own, one character repeated, a run such as `0123456789abcdef`).
pub fn check_strength(token: &str) -> Result<(), WeakToken> {
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(WeakToken::TooShort);
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(WeakToken::Whitespace);
    }
    if is_placeholder(token) {
        return Err(WeakToken::Placeholder);
    }
    Ok(())
}

/// Words that make up the placeholders people paste, separated by spaces: a token made of
/// nothing else (in any case, with any separators) is one. Digits, or any word not here, make
/// it something else.
const PLACEHOLDER_WORDS: &str = "\
    a abc access admin an and any api auth bar baz bearer change changeit default demo dev \
    dummy enter example fake foo generate here insert key letmein long me mneme my new of or \
    pass passwd password passphrase placeholder please put qwerty random replace sample \
    secret secure set some string strong super test testing the this to token value very \
    with xxx your";

/// Beginnings that say "replace me" whatever follows, separated by spaces.
const PLACEHOLDER_PREFIXES: &str =
    "changeme replaceme setme fillme putyour insertyour enteryour yourtoken yoursecret yourapi";

fn is_placeholder(token: &str) -> bool {
    let normal: String = token
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    // So few different characters is a pattern, not a secret (`aaaa…`, `abab…`, `-_-_…`); a
    // generated token of 43 characters from 64 has dozens.
    let mut distinct: Vec<char> = token.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() <= 3 {
        return true;
    }
    if PLACEHOLDER_PREFIXES
        .split_whitespace()
        .any(|p| normal.starts_with(p))
    {
        return true;
    }
    // `0123456789abcdef…`, `1234567890123…`, `abcdefghijklmnop…`: every character the one
    // after the last (digits wrapping to 0 or going on to letters).
    let ascending = normal.as_bytes().windows(2).all(|w| match w[0] {
        b'9' => w[1] == b'0' || w[1] == b'a',
        b'z' => w[1] == b'a' || w[1] == b'0',
        c => w[1] == c + 1,
    });
    if normal.len() >= MIN_TOKEN_CHARS && ascending {
        return true;
    }
    // Placeholder words, with at most a number anybody would pick between them
    // (`password1234567890`, `test-token-0123456789`, `secret-2024-token`).
    let mut letters = false;
    let mut runs = normal
        .as_bytes()
        .chunk_by(|a, b| a.is_ascii_digit() == b.is_ascii_digit());
    runs.all(|run| {
        if run[0].is_ascii_digit() {
            simple_number(run)
        } else {
            letters = true;
            std::str::from_utf8(run).is_ok_and(made_of_words)
        }
    }) && letters
}

/// A number that takes no guessing: four digits or fewer (a year, a PIN), or digits that count
/// up or down by one, or one digit repeated.
fn simple_number(digits: &[u8]) -> bool {
    let steps = |step: fn(u8) -> u8| digits.windows(2).all(|w| w[1] == step(w[0]));
    digits.len() <= 4
        || steps(|d| if d == b'9' { b'0' } else { d + 1 })
        || steps(|d| if d == b'0' { b'9' } else { d - 1 })
        || steps(|d| d)
}

/// Whether `text` (lowercase letters) splits into [`PLACEHOLDER_WORDS`] with nothing left over.
fn made_of_words(text: &str) -> bool {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_lowercase()) {
        return false;
    }
    // reachable[i]: the first i bytes split into words.
    let mut reachable = vec![false; text.len() + 1];
    reachable[0] = true;
    for start in 0..text.len() {
        if !reachable[start] {
            continue;
        }
        for word in PLACEHOLDER_WORDS.split_whitespace() {
            if text[start..].starts_with(word) {
                reachable[start + word.len()] = true;
            }
        }
    }
    reachable[text.len()]
}

/// Where the api's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `MNEME_API_TOKEN` (or `--api-token`): fixed for the life of the process, never logged.
    Setting,
    /// The token file; `generated` when this process wrote it because there was none.
    File { path: PathBuf, generated: bool },
}

/// The api's token, as a request is checked against it: the setting's, or the token file's,
/// re-read when the file changes.
#[derive(Debug)]
pub struct ApiToken {
    source: TokenSource,
    current: Mutex<Current>,
}

#[derive(Debug)]
struct Current {
    token: Arc<str>,
    /// The file as it was when `token` was read from it; `None` for the setting, or when the
    /// file was gone at the last look.
    stamp: Option<Stamp>,
    checked: Instant,
}

/// Enough of a file's metadata to tell it changed: a rotation renames a new file into place,
/// which changes the inode even when the clock's resolution hides the new modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let metadata = std::fs::metadata(path)?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
    #[cfg(not(unix))]
    let inode = 0;
    Ok(Stamp {
        modified: metadata.modified().ok(),
        len: metadata.len(),
        inode,
    })
}

impl ApiToken {
    /// A token from the setting, checked already.
    pub fn fixed(token: &str) -> ApiToken {
        ApiToken {
            source: TokenSource::Setting,
            current: Mutex::new(Current {
                token: token.into(),
                stamp: None,
                checked: Instant::now(),
            }),
        }
    }

    /// The token the api uses: the setting (`MNEME_API_TOKEN`, trimmed, empty meaning unset)
    /// when there is one, else the token file at `path`, written with a new token when there
    /// is none. A weak setting or a weak or unreadable file is an error, never a fallback.
    pub fn resolve(setting: Option<&str>, path: &Path) -> anyhow::Result<ApiToken> {
        if let Some(token) = setting {
            check_strength(token)
                .map_err(|weak| anyhow::anyhow!("MNEME_API_TOKEN {weak}: {TOKEN_HINT}"))?;
            return Ok(ApiToken::fixed(token));
        }
        let (token, generated) = load_or_create(path)?;
        Ok(ApiToken {
            source: TokenSource::File {
                path: path.to_owned(),
                generated,
            },
            current: Mutex::new(Current {
                token: token.into(),
                stamp: stamp(path).ok(),
                checked: Instant::now(),
            }),
        })
    }

    pub fn source(&self) -> &TokenSource {
        &self.source
    }

    /// The token in force. From a file, the file is looked at again at most once a [`RECHECK`]
    /// and read again when it changed; a file that went missing or holds a token that would
    /// be refused keeps the token in force (with a warning), so the api never falls open.
    pub fn current(&self) -> Arc<str> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let TokenSource::File { path, .. } = &self.source
            && current.checked.elapsed() >= RECHECK
        {
            current.checked = Instant::now();
            reload(path, &mut current);
        }
        current.token.clone()
    }
}

/// Read the token file again when its stamp changed since the last look.
fn reload(path: &Path, current: &mut Current) {
    let now = match stamp(path) {
        Ok(now) => Some(now),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot look at the api token file; keeping the token in use");
            return;
        }
    };
    if now == current.stamp {
        return;
    }
    current.stamp = now;
    match read_token_file(path) {
        Ok(Some(token)) if *token != *current.token => {
            current.token = token.into();
            tracing::info!(path = %path.display(), "the api token was rotated; the previous one is refused from now on");
        }
        Ok(Some(_)) => {}
        Ok(None) => tracing::warn!(
            path = %path.display(),
            "the api token file is gone; keeping the token in use (`mneme token rotate` writes a new one)"
        ),
        Err(error) => tracing::warn!(
            error = format!("{error:#}"),
            "the api token file changed but cannot be used; keeping the token in use"
        ),
    }
}

/// The token in the file at `path`, `None` when there is no file. A file others may read, or
/// holding a token that would be refused, is an error naming the file and the remedy.
pub fn read_token_file(path: &Path) -> anyhow::Result<Option<String>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("reading the api token from {}", path.display()));
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path)
            .with_context(|| format!("reading the api token from {}", path.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "the api token file {} may be read by other users (mode {:o}): chmod 600 it, or `mneme token rotate` for a new one",
                path.display(),
                mode & 0o777
            );
        }
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the api token file {} is not text", path.display()))?;
    let token = text.trim();
    check_strength(token).map_err(|weak| {
        anyhow::anyhow!(
            "the token in {} {weak}: remove the file to have a new one generated, or `mneme token rotate`",
            path.display()
        )
    })?;
    Ok(Some(token.to_owned()))
}

/// A new token: 32 bytes from the operating system's generator, base64url without padding
/// (43 characters, safe in a URL fragment, a header and a query).
pub fn generate_token() -> anyhow::Result<String> {
    loop {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|error| anyhow::anyhow!("reading random bytes from the system: {error}"))?;
        let token = base64url(&bytes);
        // Never true in practice; checked so a generated token is never one the api refuses.
        if check_strength(&token).is_ok() {
            return Ok(token);
        }
    }
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The token in the file at `path`, or a new one written there when there is none (`true`).
/// The file appears whole or not at all: it is written under another name and linked into
/// place, which fails when another process got there first, whose token is then the one.
pub fn load_or_create(path: &Path) -> anyhow::Result<(String, bool)> {
    if let Some(token) = read_token_file(path)? {
        return Ok((token, false));
    }
    let token = generate_token()?;
    let temp = write_temp(path, &token)?;
    let linked = std::fs::hard_link(&temp, path);
    let outcome = match linked {
        Ok(()) => Ok((token, true)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let theirs = read_token_file(path)?
                .with_context(|| format!("{} appeared and vanished again", path.display()))?;
            Ok((theirs, false))
        }
        // A file system without hard links: a rename is as atomic, only not exclusive.
        Err(_) => std::fs::rename(&temp, path)
            .map(|()| (token, true))
            .with_context(|| format!("writing the api token to {}", path.display())),
    };
    let _ = std::fs::remove_file(&temp);
    sync_dir(path);
    outcome
}

/// Replace the token in the file at `path` with a new one, atomically, and return it.
pub fn rotate_token_file(path: &Path) -> anyhow::Result<String> {
    let token = generate_token()?;
    let temp = write_temp(path, &token)?;
    if let Err(error) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(error).with_context(|| format!("writing the api token to {}", path.display()));
    }
    sync_dir(path);
    Ok(token)
}

/// Write `token` to a new file beside `path`, readable by its owner only, flushed to disk.
fn write_temp(path: &Path, token: &str) -> anyhow::Result<PathBuf> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating {} for the api token: set MNEME_API_TOKEN, or let mneme write there",
            dir.display()
        )
    })?;
    let name = path
        .file_name()
        .map_or_else(|| "api-token".into(), |n| n.to_string_lossy());
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        &generate_token()?[..8]
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let written = options.open(&temp).and_then(|mut file| {
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()
    });
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error).with_context(|| {
            format!(
                "writing the api token to {}: set MNEME_API_TOKEN, or let mneme write there",
                dir.display()
            )
        });
    }
    Ok(temp)
}

/// Make a rename or link in `path`'s directory durable; best effort, as not every system can.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
}

/// Where a browser opens the dashboard of an api listening on `addr`: an unspecified address
/// (`0.0.0.0`, as in a container) is reached on loopback.
pub fn dashboard_url(addr: SocketAddr) -> String {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        });
    }
    format!("http://{addr}/")
}

/// Answer a request nothing else answered.
pub async fn not_found() -> Response {
    ApiError::not_found("no such endpoint; the api is described at /v1/openapi.json")
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_always_need_the_token_and_reads_only_when_exposed() {
        assert_eq!(need(&Method::POST, "/v1/events"), Need::Token);
        assert_eq!(need(&Method::DELETE, "/v1/sessions/x"), Need::Token);
        assert_eq!(need(&Method::GET, "/v1/search"), Need::TokenIfExposed);
        assert_eq!(need(&Method::GET, "/metrics"), Need::TokenIfExposed);
        assert_eq!(need(&Method::POST, "/mcp"), Need::Token);
        assert_eq!(need(&Method::GET, "/mcp"), Need::Token);
        assert_eq!(need(&Method::GET, "/healthz"), Need::Nothing);
        assert_eq!(need(&Method::GET, "/"), Need::Nothing);
    }

    #[test]
    fn hosts_are_read_without_their_port_and_configured_names_include_the_origins() {
        assert_eq!(host_of("LocalHost:7437"), "localhost");
        assert_eq!(host_of("[::1]:7437"), "::1");
        assert_eq!(host_of("devbox."), "devbox");
        assert_eq!(host_of("10.0.0.5"), "10.0.0.5");
        assert_eq!(
            host_names(
                &["DevBox".to_owned()],
                &["https://mneme.example.com:8443/".to_owned()]
            ),
            vec!["devbox".to_owned(), "mneme.example.com".to_owned()]
        );
    }

    #[test]
    fn the_bucket_empties_and_says_how_long_to_wait() {
        let limiter = RateLimiter::new(3);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..3 {
            assert!(limiter.check(ip).is_ok());
        }
        let wait = limiter.check(ip).unwrap_err();
        assert!((1..=20).contains(&wait), "{wait}");
        assert!(limiter.check("127.0.0.2".parse().unwrap()).is_ok());
        assert!(RateLimiter::new(0).check(ip).is_ok());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
    }

    #[test]
    fn placeholders_are_refused_and_real_tokens_are_not() {
        for weak in [
            "change-me-to-a-long-random-token",
            "CHANGE_ME_please_0123456789",
            "changeme-changeme",
            "your-api-token-here",
            "my-super-secret-token",
            "secretsecretsecret",
            "password-password",
            "test-test-test-test",
            "example-token-value",
            "MNEME_API_TOKEN_VALUE",
            "aaaaaaaaaaaaaaaaaaaa",
            "abababababababababab",
            "0123456789abcdefghij",
            "1234567890123456",
            "password1234567890",
            "test-token-0123456789",
            "secret-2024-token-9876543210",
            "token_11111111_token",
        ] {
            assert_eq!(check_strength(weak), Err(WeakToken::Placeholder), "{weak}");
        }
        assert_eq!(check_strength("short"), Err(WeakToken::TooShort));
        assert_eq!(
            check_strength("has a space in it 0123"),
            Err(WeakToken::Whitespace)
        );
        for strong in [
            "mcp-token-0123456789",
            "test-token-8302957146",
            "compose-test-3f9a1c0e5b7d2a4c6e8f0a1b",
            "k3Xq-9vTz_PqL2mN8wRy5sU0",
            &generate_token().unwrap(),
        ] {
            assert_eq!(check_strength(strong), Ok(()), "{strong}");
        }
    }

    #[test]
    fn generated_tokens_are_long_url_safe_and_different() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 43, "{a}");
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'),
            "{a}"
        );
        assert_ne!(a, b);
        assert_eq!(base64url(b"\xff\xfe\xfd"), "__79");
        assert_eq!(base64url(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw");
    }

    #[test]
    fn dashboard_urls_name_loopback_for_an_unspecified_address() {
        assert_eq!(
            dashboard_url("0.0.0.0:7437".parse().unwrap()),
            "http://127.0.0.1:7437/"
        );
        assert_eq!(
            dashboard_url("[::]:80".parse().unwrap()),
            "http://[::1]:80/"
        );
        assert_eq!(
            dashboard_url("192.0.2.1:7437".parse().unwrap()),
            "http://192.0.2.1:7437/"
        );
    }
}
