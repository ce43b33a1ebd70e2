//! The api over a real socket, against the running system: every REST endpoint, its errors and
//! its auth.

use crate::harness::App;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "e2e-token-5d8c1f0b7a93";

fn with_token() -> api::ApiArgs {
    api::ApiArgs {
        token: Some(TOKEN.to_owned()),
        ..Default::default()
    }
}

/// A small client for one api.
pub struct Http {
    pub base: String,
    pub client: reqwest::Client,
    /// The token writes are sent with.
    pub token: String,
}

impl Http {
    pub fn new(base: &str) -> Http {
        Http {
            base: base.to_owned(),
            client: reqwest::Client::new(),
            token: TOKEN.to_owned(),
        }
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        read(response).await
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.unwrap()).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, Some(&self.token), Some(body))
            .await
    }
}

async fn read(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// Assert an error answer: its status and its stable code.
#[track_caller]
fn assert_error(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        answer.1
    );
}

/// Send the events of one small session through `POST /v1/events` and wait until retrieval has
/// indexed them.
pub async fn seed(app: &App, http: &Http, session: &str) {
    let events = json!([
        {"session_id": session, "kind": "session_start", "agent": "claude-code", "project": "/work/web", "cwd": "/work/web"},
        {"session_id": session, "kind": "prompt", "agent": "claude-code", "project": "/work/web",
         "text": "make the websocket reconnect with exponential backoff"},
        {"session_id": session, "kind": "post_tool", "agent": "claude-code", "project": "/work/web",
         "tool_name": "Edit", "input": {"file_path": "/work/web/src/socket.rs", "old_string": "retry()", "new_string": "backoff.retry()"},
         "output": {"success": true}},
        {"session_id": session, "kind": "memory", "agent": "claude-code", "project": "/work/web",
         "title": "reconnect policy", "text": "websocket reconnects use exponential backoff capped at thirty seconds",
         "concepts": ["networking"], "files": ["/work/web/src/socket.rs"]},
    ]);
    let (status, body) = http.post("/v1/events", events).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["accepted"].as_array().unwrap().len(), 4);
    let sql = format!("SELECT count(*) FROM memory_items WHERE session_id = '{session}'");
    assert!(
        app.wait_for_count(&sql, 3, Duration::from_secs(30)).await >= 3,
        "retrieval did not index the session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_answers_every_endpoint_with_its_errors_and_auth() {
    let mut app = App::start().await;
    let base = app.start_api(with_token()).await;
    let http = Http::new(&base);
    seed(&app, &http, "web-1").await;

    // Health, readiness, metrics and the document.
    let (status, health) = http.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["status"], "ok");
    let (status, ready) = http.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["services"]["retrieval"]["ok"], true);
    let (status, doc) = http.get("/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/search",
        "/v1/timeline/{id}",
        "/v1/items",
        "/v1/sessions/{id}",
        "/v1/events",
        "/v1/stats",
        "/v1/collections",
        "/v1/collections/{id}/export",
        "/v1/collections/{id}/ask",
        "/v1/export",
        "/v1/import",
        "/v1/retention",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is not documented");
    }

    // Step 1: search, with filters.
    let (status, found) = http.get("/v1/search?q=websocket%20backoff").await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hits = found["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{found}");
    assert!(hits.iter().all(|h| h["session_id"] == "web-1"));
    let (_, memories) = http
        .get("/v1/search?q=backoff&kind=memory&concept=networking&project=/work/web")
        .await;
    let memories = memories["hits"].as_array().unwrap().clone();
    assert_eq!(memories.len(), 1, "{memories:?}");
    assert_eq!(memories[0]["title"], "reconnect policy");
    let memory_id = memories[0]["id"].as_i64().unwrap();
    let (_, none) = http.get("/v1/search?q=backoff&project=/elsewhere").await;
    assert_eq!(none["hits"], json!([]));
    let (_, by_file) = http
        .get("/v1/search?q=backoff&file=socket.rs&mode=fts")
        .await;
    assert!(!by_file["hits"].as_array().unwrap().is_empty(), "{by_file}");
    assert_error(
        &http.get("/v1/search").await,
        StatusCode::BAD_REQUEST,
        "missing_parameter",
    );
    assert_error(
        &http.get("/v1/search?q=x&limit=0").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &http.get("/v1/search?q=x&limit=many").await,
        StatusCode::BAD_REQUEST,
        "invalid_query",
    );
    assert_error(
        &http.get("/v1/search?q=x&mode=psychic").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &http.get("/v1/search?q=x&min_relevance=NaN").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );

    // Steps 2 and 3: timeline and get.
    let (status, timeline) = http
        .get(&format!("/v1/timeline/{memory_id}?radius=3"))
        .await;
    assert_eq!(status, StatusCode::OK, "{timeline}");
    let anchor = timeline["anchor"].as_u64().unwrap() as usize;
    assert_eq!(timeline["items"][anchor]["id"], memory_id);
    assert!(timeline["items"].as_array().unwrap().len() >= 2);
    assert_error(
        &http.get("/v1/timeline/99999999").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &http.get("/v1/timeline/abc").await,
        StatusCode::BAD_REQUEST,
        "invalid_path",
    );
    assert_error(
        &http.get("/v1/timeline/1?radius=51").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let (status, items) = http.get(&format!("/v1/items?ids={memory_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        items["items"][0]["files"],
        json!(["/work/web/src/socket.rs"])
    );
    assert_eq!(items["items"][0]["kind"], "memory");
    let (status, item) = http.get(&format!("/v1/items/{memory_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(item["text"].as_str().unwrap().contains("thirty seconds"));
    assert_error(
        &http.get("/v1/items/99999999").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &http.get("/v1/items?ids=1,x").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &http.get("/v1/items").await,
        StatusCode::BAD_REQUEST,
        "missing_parameter",
    );

    // Sessions, patterns, checkpoints, stats.
    let (status, sessions) = http.get("/v1/sessions?project=/work/web&limit=10").await;
    assert_eq!(status, StatusCode::OK, "{sessions}");
    assert_eq!(sessions["total"], 1);
    assert_eq!(sessions["sessions"][0]["id"], "web-1");
    assert_eq!(
        sessions["sessions"][0]["title"],
        "make the websocket reconnect with exponential backoff"
    );
    let (status, session) = http.get("/v1/sessions/web-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(session["observations"].as_array().unwrap().len(), 4);
    assert_error(
        &http.get("/v1/sessions/nobody").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &http.get("/v1/sessions?archived=maybe").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let (status, patterns) = http.get("/v1/patterns?limit=5").await;
    assert_eq!(status, StatusCode::OK);
    assert!(patterns["patterns"].is_array());
    assert_error(
        &http.get("/v1/patterns?kind=astrology").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    let (status, checkpoints) = http.get("/v1/checkpoints?session=web-1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(checkpoints["checkpoints"].is_array());
    let (status, stats) = http.get("/v1/stats?days=7").await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["counts"]["sessions"], 1);
    assert_eq!(stats["counts"]["observations"], 4);
    assert!(stats["store"]["size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(stats["projects"][0]["project"], "/work/web");
    assert_error(
        &http.get("/v1/stats?days=0").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &http.get("/v1/nothing-here").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    // Writes need the token, JSON, a valid event and the dashboard's origin.
    use reqwest::Method;
    let prompt = json!({"session_id": "web-2", "kind": "prompt", "text": "hello"});
    assert_error(
        &http
            .send(Method::POST, "/v1/events", None, Some(prompt.clone()))
            .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    assert_error(
        &http
            .send(
                Method::POST,
                "/v1/events",
                Some("wrong-token-0123456789"),
                Some(prompt.clone()),
            )
            .await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let raw = |body: &'static str, content_type: &'static str| {
        http.client
            .post(format!("{base}/v1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", content_type)
            .body(body)
    };
    assert_error(
        &read(raw("{}", "text/plain").send().await.unwrap()).await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    assert_error(
        &read(raw("{not json", "application/json").send().await.unwrap()).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );
    assert_error(
        &http
            .post("/v1/events", json!({"session_id": "s", "kind": "teleport"}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_event",
    );
    assert_error(
        &http
            .post(
                "/v1/events",
                json!({"session_id": "s", "kind": "prompt", "text": "x", "colour": "red"}),
            )
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_event",
    );
    assert_error(
        &http.post("/v1/events", json!([])).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_event",
    );
    let huge = json!({"session_id": "s", "kind": "prompt", "text": "x".repeat(2 << 20)});
    // On a client of its own: the server closes a connection whose body it refused unread, and
    // a pooled connection closed under the next request fails that request.
    assert_error(
        &Http::new(&base).post("/v1/events", huge).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );
    let foreign = http
        .client
        .post(format!("{base}/v1/events"))
        .bearer_auth(TOKEN)
        .header("origin", "http://evil.example")
        .json(&prompt)
        .send()
        .await
        .unwrap();
    assert_error(
        &read(foreign).await,
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
    );
    let own = http
        .client
        .post(format!("{base}/v1/events"))
        .bearer_auth(TOKEN)
        .header("origin", base.as_str())
        .json(&prompt)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::ACCEPTED);

    // A secret sent over HTTP is scrubbed before it is published, so it never reaches a disk.
    let secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    http.post(
        "/v1/events",
        json!({"session_id": "web-3", "kind": "prompt", "text": format!("use token {secret} to push")}),
    )
    .await;
    app.wait_for_count(
        "SELECT count(*) FROM observations WHERE session_id = 'web-3'",
        1,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM observations WHERE body LIKE '%{secret}%'"
        ))
        .await,
        0
    );

    // CORS: the dashboard's own origin is allowed, others get no allowance.
    let preflight = |origin: &str| {
        http.client
            .request(Method::OPTIONS, format!("{base}/v1/events"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .send()
    };
    let own = preflight(&base).await.unwrap();
    assert_eq!(
        own.headers().get("access-control-allow-origin").unwrap(),
        base.as_str()
    );
    let evil = preflight("http://evil.example").await.unwrap();
    assert!(evil.headers().get("access-control-allow-origin").is_none());

    // Archive and unarchive, through ingest.
    let archive = "/v1/sessions/web-1/archive";
    assert_error(
        &http.send(Method::POST, archive, None, None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let (status, body) = http.send(Method::POST, archive, Some(TOKEN), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, listed) = http.get("/v1/sessions?project=/work/web").await;
    assert_eq!(listed["total"], 0);
    let (_, listed) = http
        .get("/v1/sessions?project=/work/web&archived=true")
        .await;
    assert_eq!(listed["sessions"][0]["id"], "web-1");
    assert!(listed["sessions"][0]["archived_at_ms"].as_i64().unwrap() > 0);
    let (status, _) = http
        .send(
            Method::POST,
            "/v1/sessions/web-1/unarchive",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = http.get("/v1/sessions?project=/work/web").await;
    assert_eq!(listed["total"], 1);
    assert_error(
        &http
            .send(
                Method::POST,
                "/v1/sessions/nobody/archive",
                Some(TOKEN),
                None,
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    // Delete: ingest drops the session, retrieval forgets its memory.
    assert_error(
        &http
            .send(Method::DELETE, "/v1/sessions/web-1", None, None)
            .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let (status, deleted) = http
        .send(Method::DELETE, "/v1/sessions/web-1", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["observations"], 4);
    assert!(deleted["memory_items"].as_u64().unwrap() >= 3);
    assert_error(
        &http.get("/v1/sessions/web-1").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let (_, found) = http
        .get("/v1/search?q=websocket%20backoff&session=web-1")
        .await;
    assert_eq!(found["hits"], json!([]), "{found}");
    assert_eq!(
        app.count("SELECT count(*) FROM observations WHERE session_id = 'web-1'")
            .await,
        0
    );
    assert_error(
        &http
            .send(Method::DELETE, "/v1/sessions/web-1", Some(TOKEN), None)
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    // Metrics saw all of it, by route.
    let metrics = http
        .client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "mneme_api_requests_total{method=\"GET\",route=\"/v1/search\",status=\"200\"}"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("mneme_api_events_published_total"));
    assert!(metrics.contains("mneme_nats_connected 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_without_a_token_refuses_writes_and_rate_limits() {
    let mut app = App::start_core().await;
    let base = app
        .start_api(api::ApiArgs {
            rate_per_minute: 5,
            ..Default::default()
        })
        .await;
    let http = Http::new(&base);
    assert_error(
        &http
            .post(
                "/v1/events",
                json!({"session_id": "s", "kind": "prompt", "text": "x"}),
            )
            .await,
        // No token configured: the api generated its own, which no client has been told yet.
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    // Health probes are never limited; everything else is, per client.
    for _ in 0..10 {
        assert_eq!(http.get("/healthz").await.0, StatusCode::OK);
    }
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(http.get("/v1/stats").await);
    }
    let limited = statuses.last().unwrap();
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let response = http
        .client
        .get(format!("{base}/v1/stats"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("retry-after").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_beyond_loopback_needs_the_token_for_everything() {
    let refused = api::ApiArgs {
        addr: "0.0.0.0:7437".parse().unwrap(),
        token: Some("change-me-to-a-long-random-token".to_owned()),
        ..Default::default()
    };
    let error = refused.check().unwrap_err().to_string();
    assert!(error.contains("MNEME_API_TOKEN"), "{error}");

    let mut app = App::start_core().await;
    let base = app.start_api_on("0.0.0.0:0", with_token()).await;
    let http = Http::new(&base);
    assert_eq!(http.get("/healthz").await.0, StatusCode::OK);
    assert_error(
        &http.get("/v1/stats").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    assert_error(
        &http.get("/metrics").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let (status, _) = http
        .send(reqwest::Method::GET, "/v1/stats", Some(TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// Read a server-sent event stream until `wanted` appears in it, within `timeout`.
pub async fn read_until(
    response: &mut reqwest::Response,
    seen: &mut String,
    wanted: &str,
    timeout: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while !seen.contains(wanted) {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return false,
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_stream_sends_what_the_pipeline_writes_as_it_is_written() {
    let mut app = App::start().await;
    let base = app.start_api(with_token()).await;
    let http = Http::new(&base);
    let mut live = http
        .client
        .get(format!(
            "{base}/v1/stream?kinds=observation,summary,pattern"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    assert!(
        live.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut seen = String::new();
    assert!(
        read_until(
            &mut live,
            &mut seen,
            "event: ready",
            Duration::from_secs(10)
        )
        .await,
        "{seen}"
    );

    // A prompt and a session end: the observation, then the compressor's summary, arrive live.
    let (status, _) = http
        .post(
            "/v1/events",
            json!([
                {"session_id": "live-1", "kind": "prompt", "project": "/work/live", "text": "rename the config loader"},
                {"session_id": "live-1", "kind": "session_end", "project": "/work/live", "reason": "exit"},
            ]),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(
        read_until(
            &mut live,
            &mut seen,
            "rename the config loader",
            Duration::from_secs(30)
        )
        .await,
        "{seen}"
    );
    assert!(seen.contains("event: observation"), "{seen}");
    assert!(
        read_until(
            &mut live,
            &mut seen,
            "event: summary",
            Duration::from_secs(30)
        )
        .await,
        "{seen}"
    );
    assert!(
        !seen.contains("event: structured"),
        "a filtered kind arrived: {seen}"
    );

    // The gauge counts the client while it is connected.
    let (_, metrics) = http.get("/metrics").await;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("mneme_api_stream_clients 1"),
        "{metrics}"
    );
    assert_error(
        &http.get("/v1/stream?kinds=gossip").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    drop(live);
}

/// Every row of a table as JSON arrays, in a stable order, for comparing two stores.
async fn rows(app: &App, sql: &str) -> Vec<String> {
    let store = app.store().await;
    let rows: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_all(store.pool())
        .await
        .unwrap();
    rows.into_iter().map(|(r,)| r).collect()
}

const SESSION_ROWS: &str = "SELECT json_array(id, agent, agent_version, project, cwd, host, user,
    model, transcript_path, started_at, ended_at, end_reason, last_event_at, event_count,
    prompt_count, tool_count, error_count, archived_at) FROM sessions ORDER BY id";
const OBSERVATION_ROWS: &str = "SELECT json_array(id, event_id, session_id, project, agent,
    author, kind, host_event, tool_name, tool_use_id, subagent_id, title, body, input, output,
    meta, content_hash, occurred_at, stored_at) FROM observations ORDER BY id";
const ITEM_ROWS: &str = "SELECT json_array(id, source, source_id, kind, session_id, project,
    agent, author, tool_name, title, text, context, seq, files, concepts, text_hash,
    occurred_at, indexed_at) FROM memory_items ORDER BY id";
const COLLECTION_ROWS: &str = "SELECT json_array(c.id, c.name, c.description, c.query,
    c.created_at, (SELECT json_group_array(item_id) FROM (SELECT item_id FROM collection_items
    WHERE collection_id = c.id ORDER BY position))) FROM collections c ORDER BY c.id";
const COLLECTION_TEXTS: &str = "SELECT json_array(c.name, c.query, c.created_at,
    (SELECT json_group_array(text) FROM (SELECT m.text FROM collection_items ci
     JOIN memory_items m ON m.id = ci.item_id WHERE ci.collection_id = c.id
     ORDER BY ci.position))) FROM collections c ORDER BY c.name";

/// Send a raw body with the token.
async fn post_raw(
    http: &Http,
    path: &str,
    body: String,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = http
        .client
        .post(format!("{}{path}", http.base))
        .header("content-type", "application/x-ndjson")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    read(request.send().await.unwrap()).await
}

async fn get_text(http: &Http, path: &str) -> (StatusCode, String, String) {
    let response = http
        .client
        .get(format!("{}{path}", http.base))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

/// The ids and titles of a search, in order.
async fn hits(http: &Http, query: &str) -> Vec<(i64, String)> {
    let (status, found) = http.get(&format!("/v1/search?{query}")).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_i64().unwrap(),
                h["title"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collections_are_made_from_a_search_or_ids_exported_and_asked() {
    let mut app = App::start_core().await;
    let base = app.start_api(with_token()).await;
    let http = Http::new(&base);
    seed(&app, &http, "web-1").await;
    let (status, body) = http
        .post(
            "/v1/events",
            json!([
                {"session_id": "db-1", "kind": "prompt", "agent": "claude-code", "project": "/work/db",
                 "text": "add a migration that renames the users table to accounts"},
                {"session_id": "db-1", "kind": "memory", "agent": "claude-code", "project": "/work/db",
                 "title": "migration rule", "text": "every schema migration is reversible and tested against a copy of production"},
            ]),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.wait_indexed(5).await;

    // From a search: the hits of that search, with its filters.
    let (status, from_search) = http
        .post(
            "/v1/collections",
            json!({"name": "reconnects", "description": "how the socket comes back", "query": "websocket backoff", "project": "/work/web"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{from_search}");
    assert_eq!(from_search["query"], "websocket backoff");
    let reconnects = from_search["id"].as_i64().unwrap();
    let (_, expected) = http
        .get("/v1/search?q=websocket%20backoff&project=/work/web")
        .await;
    assert_eq!(
        from_search["items"],
        expected["hits"].as_array().unwrap().len(),
        "{expected}"
    );
    let (_, whole) = http.get(&format!("/v1/collections/{reconnects}")).await;
    assert!(
        whole["item_list"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["session_id"] == "web-1"),
        "{whole}"
    );

    // From ids, in the order given.
    let reconnect_memory = hits(&http, "q=backoff&kind=memory").await[0].0;
    let migration_memory = hits(&http, "q=migration&kind=memory").await[0].0;
    let (status, from_ids) = http
        .post(
            "/v1/collections",
            json!({"name": "rules", "item_ids": [migration_memory, reconnect_memory, migration_memory]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{from_ids}");
    assert_eq!(from_ids["items"], 2, "duplicates are kept once: {from_ids}");
    let rules = from_ids["id"].as_i64().unwrap();

    // Bad input, each with its code.
    let answer = http
        .post(
            "/v1/collections",
            json!({"name": "rules", "item_ids": [reconnect_memory]}),
        )
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "collection_exists");
    for body in [
        json!({"name": "neither"}),
        json!({"name": "both", "query": "x", "item_ids": [1]}),
        json!({"name": "", "item_ids": [1]}),
        json!({"name": "ghosts", "item_ids": [99_999_999]}),
        json!({"name": "negative", "item_ids": [-1]}),
        json!({"name": "empty query", "query": "  "}),
    ] {
        let answer = http.post("/v1/collections", body.clone()).await;
        assert_error(
            &answer,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_collection",
        );
    }
    assert_error(
        &http
            .post("/v1/collections", json!({"name": "x", "colour": "red"}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_body",
    );
    assert_error(
        &http
            .send(
                reqwest::Method::POST,
                "/v1/collections",
                None,
                Some(json!({"name": "no token", "item_ids": [reconnect_memory]})),
            )
            .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );

    // List.
    let (status, list) = http.get("/v1/collections").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["collections"][0]["name"], "rules");
    assert_error(
        &http.get("/v1/collections?limit=0").await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );

    // Export in three formats, with the items in the order they were collected.
    let (status, kind, markdown) = get_text(
        &http,
        &format!("/v1/collections/{rules}/export?format=markdown"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{markdown}");
    assert!(kind.starts_with("text/markdown"), "{kind}");
    assert!(markdown.starts_with("# rules\n"), "{markdown}");
    let (migration_at, reconnect_at) = (
        markdown.find("## migration rule").expect(&markdown),
        markdown.find("## reconnect policy").expect(&markdown),
    );
    assert!(migration_at < reconnect_at, "{markdown}");
    assert!(markdown.contains("reversible and tested against a copy of production"));
    assert!(markdown.contains("- concepts: networking"), "{markdown}");
    let (status, kind, document) = get_text(
        &http,
        &format!("/v1/collections/{rules}/export?format=json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "application/json");
    let document: Value = serde_json::from_str(&document).unwrap();
    assert_eq!(document["collection"]["name"], "rules");
    assert_eq!(document["items"][0]["id"], migration_memory);
    assert_eq!(document["items"][1]["title"], "reconnect policy");
    assert_eq!(
        document["items"][1]["text"],
        "websocket reconnects use exponential backoff capped at thirty seconds"
    );
    let (status, kind, text) = get_text(
        &http,
        &format!("/v1/collections/{rules}/export?format=text"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.starts_with("text/plain"), "{kind}");
    assert!(text.starts_with("rules\n=====\n"), "{text}");
    assert!(
        text.contains(&format!("#{reconnect_memory} [memory]")),
        "{text}"
    );
    assert!(!text.contains("## "), "plain text has no markdown: {text}");
    assert_error(
        &http
            .get(&format!("/v1/collections/{rules}/export?format=pdf"))
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_parameter",
    );
    assert_error(
        &http.get("/v1/collections/99999999/export").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    // Ask: the relevant item of the collection first, and nothing from outside it.
    let (status, answer) = http
        .get(&format!(
            "/v1/collections/{rules}/ask?q=is%20every%20schema%20migration%20reversible"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["hits"][0]["id"], migration_memory, "{answer}");
    let (_, answer) = http
        .get(&format!(
            "/v1/collections/{reconnects}/ask?q=schema%20migration%20reversible"
        ))
        .await;
    assert!(
        answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["session_id"] == "web-1"),
        "{answer}"
    );
    assert_error(
        &http.get(&format!("/v1/collections/{rules}/ask")).await,
        StatusCode::BAD_REQUEST,
        "missing_parameter",
    );
    assert_error(
        &http.get("/v1/collections/99999999/ask?q=x").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &http.get("/v1/collections/0/ask?q=x").await,
        StatusCode::BAD_REQUEST,
        "invalid_path",
    );

    // Deleting a session takes its items out of collections; deleting a collection keeps them.
    let (status, deleted) = http
        .send(
            reqwest::Method::DELETE,
            "/v1/sessions/db-1",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let (_, rules_now) = http.get(&format!("/v1/collections/{rules}")).await;
    assert_eq!(rules_now["items"], 1, "{rules_now}");
    let (status, _) = http
        .send(
            reqwest::Method::DELETE,
            &format!("/v1/collections/{rules}"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_error(
        &http.get(&format!("/v1/collections/{rules}")).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(
        hits(&http, "q=backoff&kind=memory").await[0].0,
        reconnect_memory
    );
    app.stop_services().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_import_into_a_fresh_store_is_lossless_and_idempotent() {
    let mut source = App::start_core().await;
    let http = Http::new(&source.start_api(with_token()).await);
    seed(&source, &http, "web-1").await;
    seed(&source, &http, "web-2").await;
    source.wait_indexed(6).await;
    let (status, kind, export) = get_text(&http, "/v1/export").await;
    assert_eq!(status, StatusCode::OK, "{export}");
    assert_eq!(kind, "application/x-ndjson");
    let lines: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "mneme");
    assert_eq!(lines[0]["format"], 1);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "end", "{last}");
    let count = |kind: &str| lines.iter().filter(|l| l["type"] == kind).count() as i64;
    assert_eq!(count("session"), 2);
    assert_eq!(
        count("observation"),
        source.count("SELECT count(*) FROM observations").await
    );
    assert_eq!(
        count("memory_item"),
        source.count("SELECT count(*) FROM memory_items").await
    );
    assert_eq!(last["memory_items"], count("memory_item"));
    let queries = [
        "q=websocket%20backoff&mode=fts",
        "q=websocket%20backoff",
        "q=reconnect%20policy%20thirty%20seconds&kind=memory",
        "q=socket.rs&file=socket.rs",
    ];
    let mut before = Vec::new();
    for q in queries {
        before.push(hits(&http, q).await);
    }
    assert!(!before[0].is_empty());

    let mut fresh = App::start_core().await;
    let fresh_http = Http::new(&fresh.start_api(with_token()).await);
    assert_error(
        &post_raw(&fresh_http, "/v1/import", export.clone(), None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    let (status, imported) = post_raw(&fresh_http, "/v1/import", export.clone(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{imported}");
    assert_eq!(imported["sessions"], 2, "{imported}");
    assert_eq!(imported["observations"], count("observation"), "{imported}");
    assert_eq!(imported["memory_items"], count("memory_item"), "{imported}");
    assert_eq!(imported["skipped"], 0, "{imported}");
    fresh.wait_indexed(count("memory_item")).await;

    // Every row as it was, ids included, and the same answers to the same searches.
    for sql in [SESSION_ROWS, OBSERVATION_ROWS, ITEM_ROWS] {
        assert_eq!(rows(&fresh, sql).await, rows(&source, sql).await, "{sql}");
    }
    for (q, expected) in queries.iter().zip(&before) {
        assert_eq!(&hits(&fresh_http, q).await, expected, "{q}");
    }

    // Twice doubles nothing.
    let (status, again) = post_raw(&fresh_http, "/v1/import", export.clone(), Some(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["sessions"], 0, "{again}");
    assert_eq!(again["observations"], 0, "{again}");
    assert_eq!(again["memory_items"], 0, "{again}");
    assert_eq!(
        again["skipped"],
        count("session") + count("observation") + count("memory_item")
    );
    for sql in [SESSION_ROWS, OBSERVATION_ROWS, ITEM_ROWS] {
        assert_eq!(rows(&fresh, sql).await, rows(&source, sql).await, "{sql}");
    }

    // Into a store that already has memory: new rows take new ids above the others, and are
    // found.
    let (_, reimported) = post_raw(&http, "/v1/import", export.clone(), Some(TOKEN)).await;
    assert_eq!(reimported["memory_items"], 0, "{reimported}");

    // Bad input.
    for (body, status, code) in [
        ("", StatusCode::UNPROCESSABLE_ENTITY, "invalid_import"),
        (
            "not json\n",
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_import",
        ),
        (
            r#"{"type":"planet"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_import",
        ),
        (
            r#"{"type":"session","id":""}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_import",
        ),
        (
            r#"{"type":"mneme","format":99}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported_export",
        ),
    ] {
        let answer = post_raw(&fresh_http, "/v1/import", body.to_owned(), Some(TOKEN)).await;
        assert_error(&answer, status, code);
    }
    let answer = post_raw(
        &fresh_http,
        "/v1/import",
        format!("{}\nnot json\n", export.lines().next().unwrap()),
        Some(TOKEN),
    )
    .await;
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 2:"),
        "{answer:?}"
    );
    source.stop_services().await;
    fresh.stop_services().await;
}

/// The command line writes the api's export format and reads it back through the same owners,
/// with no api running on the importing side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_exports_and_imports_what_the_api_does() {
    let mut source = App::start_core().await;
    let http = Http::new(&source.start_api(with_token()).await);
    seed(&source, &http, "cli-1").await;
    seed(&source, &http, "cli-2").await;
    source.wait_indexed(6).await;
    // Collections name items by id: one from a list (in an order of its own), one from a search.
    let memory = |session: &str| {
        format!("SELECT id FROM memory_items WHERE kind = 'memory' AND session_id = '{session}'")
    };
    let (first, second) = (
        source.count(&memory("cli-1")).await,
        source.count(&memory("cli-2")).await,
    );
    for body in [
        json!({"name": "picked", "item_ids": [second, first]}),
        json!({"name": "about backoff", "query": "exponential backoff"}),
    ] {
        let (status, made) = http.post("/v1/collections", body).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backup.jsonl");
    let out = source.mneme(&["export", "--jsonl", "--out", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.path().join("backup.jsonl.partial").exists());
    let written = std::fs::read_to_string(&file).unwrap();
    let (_, _, served) = get_text(&http, "/v1/export").await;
    // The same lines as the api's export, but for the time in the header.
    let body = |text: &str| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(body(&written), body(&served));
    assert!(written.lines().last().unwrap().contains("\"type\":\"end\""));
    // Standard output, when no file is given.
    let out = source.mneme(&["export", "--jsonl"]);
    assert!(out.status.success());
    assert_eq!(body(&String::from_utf8_lossy(&out.stdout)), body(&written));

    assert_eq!(written.matches("\"type\":\"collection\"").count(), 2);

    let fresh = App::start_core().await;
    let out = fresh.mneme(&[
        "import",
        "mneme",
        "--no-wait",
        "--path",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["sessions"], 2, "{done}");
    assert_eq!(done["collections"], 2, "{done}");
    assert_eq!(done["skipped"], 0, "{done}");
    for sql in [SESSION_ROWS, OBSERVATION_ROWS, ITEM_ROWS, COLLECTION_ROWS] {
        assert_eq!(rows(&fresh, sql).await, rows(&source, sql).await, "{sql}");
    }
    let again = fresh.mneme(&[
        "import",
        "mneme",
        "--no-wait",
        "--path",
        file.to_str().unwrap(),
    ]);
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (
            again["sessions"].as_i64(),
            again["memory_items"].as_i64(),
            again["collections"].as_i64()
        ),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(
        rows(&fresh, COLLECTION_ROWS).await,
        rows(&source, COLLECTION_ROWS).await
    );

    // Into a store with memory of its own, items take other ids, and the collections follow
    // them: the same texts in the same order.
    let mut busy = App::start_core().await;
    let busy_http = Http::new(&busy.start_api(with_token()).await);
    seed(&busy, &busy_http, "own-1").await;
    let out = busy.mneme(&[
        "import",
        "mneme",
        "--no-wait",
        "--path",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(
        rows(&busy, COLLECTION_ROWS).await,
        rows(&source, COLLECTION_ROWS).await
    );
    assert_eq!(
        rows(&busy, COLLECTION_TEXTS).await,
        rows(&source, COLLECTION_TEXTS).await
    );
    busy.stop_services().await;

    // A bad line stops the import there and says where; no file, no import.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        format!("{}\nnot json\n", written.lines().next().unwrap()),
    )
    .unwrap();
    let out = fresh.mneme(&[
        "import",
        "mneme",
        "--no-wait",
        "--path",
        bad.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2:") && stderr.contains("invalid_import"),
        "{stderr}"
    );
    let out = fresh.mneme(&["import", "mneme"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--path"));
    source.stop_services().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_archives_idle_sessions_then_deletes_them_from_memory() {
    let mut app = App::start_core().await;
    let http = Http::new(&app.start_api(with_token()).await);
    const DAY: i64 = 86_400_000;
    let now = common::time::now_ms();
    // Back-dated sessions: 40 and 15 days idle, one active, and deliberate memories from long
    // ago.
    let event = |session: &str, days: i64, text: &str| {
        json!({"session_id": session, "kind": "prompt", "agent": "claude-code", "project": "/work/r",
               "occurred_at_ms": now - days * DAY, "text": text})
    };
    let (status, body) = http
        .post(
            "/v1/events",
            json!([
                event("old-1", 40, "tune the zeppelin ballast controller"),
                event("mid-1", 15, "paint the lighthouse in ochre"),
                event("new-1", 0, "write the quarterly report"),
                {"session_id": "memories", "kind": "memory", "project": "/work/r",
                 "occurred_at_ms": now - 90 * DAY, "title": "kept", "text": "the zeppelin hangar code is blue"},
            ]),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.wait_indexed(4).await;

    let (status, policy) = http.get("/v1/retention").await;
    assert_eq!(status, StatusCode::OK, "{policy}");
    assert_eq!(policy["archive_after_days"], 0, "{policy}");
    assert_error(
        &http
            .send(
                reqwest::Method::PUT,
                "/v1/retention",
                None,
                Some(json!({"archive_after_days": 1})),
            )
            .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    for (body, code) in [
        (json!({"archive_after_days": 40_000}), "invalid_retention"),
        (json!({"archive_after_days": -1}), "invalid_body"),
        (json!({"keep_forever": true}), "invalid_body"),
    ] {
        let answer = http
            .send(
                reqwest::Method::PUT,
                "/v1/retention",
                Some(TOKEN),
                Some(body),
            )
            .await;
        assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, code);
    }

    // Archive after 10 idle days: the two old sessions, as of when they went idle that long.
    let (status, applied) = http
        .send(
            reqwest::Method::PUT,
            "/v1/retention",
            Some(TOKEN),
            Some(json!({"archive_after_days": 10})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{applied}");
    assert_eq!(applied["applied"]["archived"], 2, "{applied}");
    assert_eq!(applied["applied"]["deleted"], 0, "{applied}");
    let (_, archived) = http.get("/v1/sessions?archived=only").await;
    let mut names: Vec<&str> = archived["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["mid-1", "old-1"], "{archived}");
    let old = archived["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "old-1")
        .unwrap();
    assert_eq!(
        old["archived_at_ms"].as_i64().unwrap(),
        old["last_event_at_ms"].as_i64().unwrap() + 10 * DAY
    );
    let (_, active) = http.get("/v1/sessions").await;
    let active: Vec<&str> = active["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        active.contains(&"new-1") && active.contains(&"memories"),
        "{active:?}"
    );
    // Archived memory is still found.
    assert_eq!(
        hits(&http, "q=zeppelin%20ballast&kind=prompt&mode=fts")
            .await
            .len(),
        1
    );

    // Delete 20 days after archiving: old-1 went idle 30 days ago, mid-1 only 5.
    let (status, applied) = http
        .send(
            reqwest::Method::PUT,
            "/v1/retention",
            Some(TOKEN),
            Some(json!({"delete_archived_after_days": 20})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{applied}");
    assert_eq!(
        applied["archive_after_days"], 10,
        "a field left out keeps its value"
    );
    assert_eq!(applied["applied"]["deleted"], 1, "{applied}");
    assert_eq!(applied["last_run"]["deleted"], 1, "{applied}");
    assert_error(
        &http.get("/v1/sessions/old-1").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert!(
        hits(&http, "q=zeppelin%20ballast&kind=prompt&mode=fts")
            .await
            .is_empty()
    );
    assert_eq!(
        app.count("SELECT count(*) FROM memory_items WHERE session_id = 'old-1'")
            .await,
        0
    );
    let (status, _) = http.get("/v1/sessions/mid-1").await;
    assert_eq!(status, StatusCode::OK);
    // Deliberate memories are never aged out.
    assert_eq!(
        hits(&http, "q=zeppelin%20hangar&kind=memory").await.len(),
        1
    );

    // Applying again changes nothing.
    let (status, again) = http.post("/v1/retention/apply", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        again["applied"],
        json!({"archived": 0, "deleted": 0}),
        "{again}"
    );
    app.stop_services().await;
}

/// One write: a prompt through `POST /v1/events`, with `token` when given.
async fn write_with(http: &Http, token: Option<&str>) -> (StatusCode, Value) {
    http.send(
        reqwest::Method::POST,
        "/v1/events",
        token,
        Some(json!({"session_id": "token-test", "kind": "prompt", "text": "a prompt"})),
    )
    .await
}

/// `mneme` with the app's environment and none of the caller's api token.
fn mneme_token(app: &App, args: &[&str], setting: Option<&str>) -> std::process::Output {
    let mut command = std::process::Command::new(crate::harness::binary("mneme"));
    command
        .args(args)
        .envs(app.env())
        .env_remove("MNEME_API_TOKEN");
    if let Some(token) = setting {
        command.env("MNEME_API_TOKEN", token);
    }
    command.output().unwrap()
}

fn file_mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// With no `MNEME_API_TOKEN`, the api writes a token file only its owner can read and answers
/// writes and MCP to that token only; `mneme token` prints it, `mneme token rotate` replaces it,
/// and the running api refuses the old one and takes the new one without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_generates_its_token_and_takes_a_rotated_one_without_a_restart() {
    let mut app = App::start_core().await;
    let path = app.home.path().join("api-token");
    assert!(!path.exists());
    let base = app.start_api(api::ApiArgs::default()).await;
    let first = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    assert_eq!(file_mode(&path), 0o600);
    assert_eq!(first.len(), 43, "{first}");
    assert!(api::security::check_strength(&first).is_ok());
    let http = Http::new(&base);

    assert_error(
        &write_with(&http, None).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    assert_error(
        &write_with(&http, Some(TOKEN)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let (status, body) = write_with(&http, Some(&first)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    // Reads on loopback stay open; MCP over HTTP, which can save memories, does not.
    assert_eq!(http.get("/v1/stats").await.0, StatusCode::OK);
    let mcp = http
        .client
        .post(format!("{base}/mcp"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), StatusCode::UNAUTHORIZED);

    // `mneme token` prints the token the api uses, and says where it came from.
    let printed = mneme_token(&app, &["token"], None);
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), first);
    let said = String::from_utf8_lossy(&printed.stderr);
    assert!(said.contains(&path.display().to_string()), "{said}");

    // Rotation: a new token in the file, still readable by its owner only.
    let rotated = mneme_token(&app, &["token", "rotate"], None);
    assert!(rotated.status.success(), "{rotated:?}");
    let second = String::from_utf8_lossy(&rotated.stdout).trim().to_owned();
    assert_ne!(second, first);
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), second);
    assert_eq!(file_mode(&path), 0o600);
    let printed = mneme_token(&app, &["token"], None);
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), second);

    // The running api looks at the file at most once a second: within a few, the old token is
    // refused and the new one accepted.
    let refused = crate::harness::wait_until(Duration::from_secs(10), || async {
        write_with(&http, Some(&first)).await.0 == StatusCode::UNAUTHORIZED
    })
    .await;
    assert!(
        refused.is_ok(),
        "the api still accepts the rotated-out token"
    );
    assert_error(
        &write_with(&http, Some(&first)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let (status, body) = write_with(&http, Some(&second)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // A file made useless by hand (a placeholder) is not taken: the token in force stays.
    std::fs::write(&path, "change-me-to-a-long-random-token\n").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, body) = write_with(&http, Some(&second)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_error(
        &write_with(&http, Some("change-me-to-a-long-random-token")).await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let printed = mneme_token(&app, &["token"], None);
    assert!(!printed.status.success());
    let said = String::from_utf8_lossy(&printed.stderr);
    assert!(said.contains("placeholder"), "{said}");
    app.stop_services().await;
}

/// `MNEME_API_TOKEN` wins over the token file, for the api and for `mneme token`, which then
/// refuses to rotate the file; a placeholder or short token stops the api at start with the
/// reason, the way the container runs it (`mneme serve api`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_token_setting_wins_over_the_file_and_placeholders_stop_the_api() {
    const SETTING: &str = "setting-token-4f1c9a7e2b";
    let mut app = App::start_core().await;
    let path = app.home.path().join("api-token");
    // A token file from an earlier run (`mneme token` makes one when there is none).
    let made = mneme_token(&app, &["token"], None);
    assert!(made.status.success(), "{made:?}");
    let file = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), file);
    assert!(String::from_utf8_lossy(&made.stderr).contains("generated"));

    let base = app
        .start_api(api::ApiArgs {
            token: Some(SETTING.to_owned()),
            ..Default::default()
        })
        .await;
    let http = Http::new(&base);
    assert_error(
        &write_with(&http, Some(&file)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    let (status, body) = write_with(&http, Some(SETTING)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    let printed = mneme_token(&app, &["token"], Some(SETTING));
    assert!(printed.status.success(), "{printed:?}");
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), SETTING);
    let said = String::from_utf8_lossy(&printed.stderr);
    assert!(said.contains("MNEME_API_TOKEN"), "{said}");
    let rotate = mneme_token(&app, &["token", "rotate"], Some(SETTING));
    assert!(!rotate.status.success());
    let said = String::from_utf8_lossy(&rotate.stderr);
    assert!(said.contains("MNEME_API_TOKEN is set"), "{said}");
    assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), file);
    // An empty setting is no setting, as compose passes an unset variable on.
    let printed = mneme_token(&app, &["token"], Some(""));
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), file);

    // The file changing does not matter while the setting is in force.
    let rotated = mneme_token(&app, &["token", "rotate"], None);
    let new_file = String::from_utf8_lossy(&rotated.stdout).trim().to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_error(
        &write_with(&http, Some(&new_file)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );
    assert_eq!(
        write_with(&http, Some(SETTING)).await.0,
        StatusCode::ACCEPTED
    );

    // Refused at start, before the api listens or reaches NATS.
    for (token, reason) in [
        (
            "change-me-to-a-long-random-token",
            "MNEME_API_TOKEN is a placeholder",
        ),
        ("secret-password-token", "MNEME_API_TOKEN is a placeholder"),
        (
            "xxxxxxxxxxxxxxxxxxxxxxxx",
            "MNEME_API_TOKEN is a placeholder",
        ),
        (
            "short-token",
            "MNEME_API_TOKEN must be at least 16 characters",
        ),
    ] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let error = api::serve(
            app.common.clone(),
            api::ApiArgs {
                token: Some(token.to_owned()),
                ..Default::default()
            },
            listener,
            app.shutdown.clone(),
        )
        .await
        .unwrap_err();
        let error = format!("{error:#}");
        assert!(error.contains(reason), "{token}: {error}");

        let served = std::process::Command::new(crate::harness::binary("mneme"))
            .args(["serve", "api"])
            .envs(app.env())
            .env("MNEME_API_ADDR", "127.0.0.1:0")
            .env("MNEME_API_TOKEN", token)
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        assert!(!served.status.success(), "{token} was accepted");
        let said = String::from_utf8_lossy(&served.stderr);
        assert!(said.contains(reason), "{token}: {said}");
        assert!(!said.contains("api listening"), "{said}");
    }
    let printed = mneme_token(&app, &["token"], Some("change-me-to-a-long-random-token"));
    assert!(!printed.status.success());
    assert!(printed.stdout.is_empty());
    app.stop_services().await;
}

/// `mneme up` shows the dashboard's address with the token it generated (the one in the file),
/// then says when every service answers, and keeps the token across restarts.
#[test]
fn mneme_up_shows_the_dashboard_with_its_token_and_says_when_ready() {
    let home = tempfile::tempdir().unwrap();
    let free = crate::harness::free_port;
    let (nats_port, api_port) = (free(), free());
    let up = |log: &str| {
        std::process::Command::new(crate::harness::binary("mneme"))
            .arg("up")
            .env_remove("MNEME_NATS_URL")
            .env_remove("MNEME_API_TOKEN")
            .env("MNEME_HOME", home.path())
            .env("MNEME_NATS_PORT", nats_port.to_string())
            .env("MNEME_API_ADDR", format!("127.0.0.1:{api_port}"))
            .env("MNEME_EMBED_MODEL_DIR", crate::harness::model_dir())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(home.path().join(log)).unwrap())
            .spawn()
            .unwrap()
    };
    let read_until_ready = |child: &mut std::process::Child| {
        crate::harness::stdout_until(child, "mneme is ready", Duration::from_secs(90))
    };
    let stop = |mut child: std::process::Child| {
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(child.wait().unwrap().success());
    };

    let mut first = up("up.log");
    let lines = read_until_ready(&mut first);
    let log = || std::fs::read_to_string(home.path().join("up.log")).unwrap_or_default();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("mneme is ready")),
        "{lines:?}\n{}",
        log()
    );
    let token = std::fs::read_to_string(home.path().join("api-token"))
        .unwrap()
        .trim()
        .to_owned();
    let dashboard = format!("dashboard: http://127.0.0.1:{api_port}/#token={token}");
    assert!(lines.contains(&dashboard), "{lines:?}");
    for service in ["ingest", "retrieval", "compressor", "pattern", "api"] {
        assert!(lines.last().unwrap().contains(service), "{lines:?}");
    }
    // Ready means answering: the api serves a write with the token from the banner.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (status, body) = runtime.block_on(async {
        let http = Http::new(&format!("http://127.0.0.1:{api_port}"));
        write_with(&http, Some(&token)).await
    });
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    stop(first);

    // The next start finds the same token and shows it again; the api does not log it.
    let mut second = up("up2.log");
    let lines = read_until_ready(&mut second);
    assert!(lines.contains(&dashboard), "{lines:?}");
    stop(second);
    let log = std::fs::read_to_string(home.path().join("up2.log")).unwrap();
    assert!(!log.contains(&token), "{log}");
}

/// Live streams are bounded per client address and in all, and their place comes back when a
/// stream ends; a browser's percent-encoded `access_token` is decoded before it is compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_are_capped_and_a_percent_encoded_token_is_read() {
    let mut app = App::start_core().await;
    // A token with the characters a query string must escape.
    let token = "k+ey/with=odd&chars-5d8c1f0b7a93";
    let base = app
        .start_api_on(
            "0.0.0.0:0",
            api::ApiArgs {
                token: Some(token.to_owned()),
                max_streams: 3,
                max_streams_per_address: 2,
                ..Default::default()
            },
        )
        .await;
    let client = reqwest::Client::new();
    let encoded: String = token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let open = |base: String, access: String| {
        let client = client.clone();
        async move {
            client
                .get(format!("{base}/v1/stream?access_token={access}"))
                .send()
                .await
                .unwrap()
        }
    };
    // Beyond loopback every request needs the token: the encoded one is accepted, the token as
    // written (with its raw `+`, `/`, `=` and `&`) is not the token once the query is read.
    let first = open(base.clone(), encoded.clone()).await;
    assert_eq!(first.status(), StatusCode::OK);
    let raw = open(base.clone(), token.to_owned()).await;
    assert_eq!(raw.status(), StatusCode::UNAUTHORIZED);
    let second = open(base.clone(), encoded.clone()).await;
    assert_eq!(second.status(), StatusCode::OK);
    let third = open(base.clone(), encoded.clone()).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    let (_, body) = read(third).await;
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    // A stream that ends gives its place back (as soon as the server sees the connection go).
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let reopened = loop {
        let response = open(base.clone(), encoded.clone()).await;
        if response.status() == StatusCode::OK || std::time::Instant::now() > deadline {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        reopened.status(),
        StatusCode::OK,
        "the place of a closed stream was not given back"
    );
    drop(second);
}

/// Behind a configured reverse proxy the client is the address it forwarded for; from anyone
/// else `X-Forwarded-For` is ignored, so a client cannot escape the rate limit by naming
/// another address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_counts_the_forwarded_client_only_behind_a_trusted_proxy() {
    let mut app = App::start_core().await;
    let limited = |trusted: Vec<std::net::IpAddr>| api::ApiArgs {
        rate_per_minute: 2,
        trusted_proxies: trusted,
        ..Default::default()
    };
    let client = reqwest::Client::new();
    let get = |base: String, forwarded: &'static str| {
        let client = client.clone();
        async move {
            client
                .get(format!("{base}/v1/stats"))
                .header("x-forwarded-for", forwarded)
                .send()
                .await
                .unwrap()
                .status()
        }
    };

    let untrusted = app.start_api(limited(Vec::new())).await;
    assert_eq!(get(untrusted.clone(), "10.0.0.1").await, StatusCode::OK);
    assert_eq!(get(untrusted.clone(), "10.0.0.2").await, StatusCode::OK);
    assert_eq!(
        get(untrusted.clone(), "10.0.0.3").await,
        StatusCode::TOO_MANY_REQUESTS,
        "a header from a client that is not a trusted proxy moved the limit"
    );

    let proxied = app
        .start_api(limited(vec!["127.0.0.1".parse().unwrap()]))
        .await;
    // The rightmost address the proxy did not add itself is the client; what a client wrote
    // to its left proves nothing.
    assert_eq!(get(proxied.clone(), "10.0.0.1").await, StatusCode::OK);
    assert_eq!(
        get(proxied.clone(), "6.6.6.6, 10.0.0.1").await,
        StatusCode::OK
    );
    assert_eq!(
        get(proxied.clone(), "7.7.7.7, 10.0.0.1").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(get(proxied.clone(), "10.0.0.2").await, StatusCode::OK);
}
