//! Who may call what, and how often: the token, the origin check, CORS and the rate limit.
//!
//! The rules, in order:
//! - `/healthz`, `/readyz` and the dashboard's static files are open (they hold no memory);
//! - anything that writes or deletes (`POST`, `PUT`, `PATCH`, `DELETE` under `/v1`) needs the
//!   token always, and is refused outright when no token is configured;
//! - `/mcp` needs the token whenever one is configured;
//! - everything else needs the token when the api is bound to a non-loopback address (the api
//!   refuses to start there without one);
//! - a browser request from another origin may not write, whatever its credentials.

use crate::State;
use crate::error::ApiError;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Nothing,
    /// The token when one is configured (or the api is not on loopback).
    TokenIfSet,
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
        Need::TokenIfSet
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
    request: Request,
    next: Next,
) -> Response {
    match check(&state, &request) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

fn check(state: &State, request: &Request) -> Result<(), ApiError> {
    let path = request.uri().path();
    let method = request.method();
    if *method == Method::OPTIONS {
        // CORS preflights carry no credentials; the CORS layer answers them.
        return Ok(());
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
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
    let needed = match need(method, path) {
        Need::Nothing => return Ok(()),
        Need::TokenIfExposed if state.loopback => return Ok(()),
        Need::TokenIfSet if state.token.is_none() => return Ok(()),
        needed => needed,
    };
    let Some(expected) = state.token.as_deref() else {
        debug_assert_eq!(needed, Need::Token);
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "token_required",
            "this endpoint changes memory and is disabled until MNEME_API_TOKEN is set",
        ));
    };
    match presented(request) {
        Some(token) if same(token.as_bytes(), expected.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the token does not match MNEME_API_TOKEN",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this endpoint needs the api token: send `authorization: bearer <MNEME_API_TOKEN>`",
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
            .map(|(_, v)| v.to_owned());
    }
    None
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
        assert_eq!(need(&Method::POST, "/mcp"), Need::TokenIfSet);
        assert_eq!(need(&Method::GET, "/healthz"), Need::Nothing);
        assert_eq!(need(&Method::GET, "/"), Need::Nothing);
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
}
