//! The REST endpoints under `/v1`, plus `/healthz`, `/readyz` and `/metrics`.

use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query};
use crate::{State, events};
use archive::Archived;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use proto::subjects;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

type AppState = axum::extract::State<Arc<State>>;

/// Every route of this module.
pub fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/search", get(search))
        .route("/v1/timeline/{id}", get(timeline))
        .route("/v1/items", get(items))
        .route("/v1/items/{id}", get(item))
        .route("/v1/sessions", get(sessions))
        .route("/v1/sessions/{id}", get(session).delete(delete_session))
        .route("/v1/sessions/{id}/archive", post(archive_session))
        .route("/v1/sessions/{id}/unarchive", post(unarchive_session))
        .route("/v1/patterns", get(patterns))
        .route("/v1/checkpoints", get(checkpoints))
        .route("/v1/stats", get(stats))
        .route("/v1/events", post(post_events))
        .route("/v1/stream", get(crate::stream::stream))
}

/// The services `readyz` asks, and whether the api needs each to answer its own requests.
const SERVICES: [(&str, bool); 4] = [
    ("ingest", true),
    ("retrieval", true),
    ("compressor", false),
    ("pattern", false),
];

async fn healthz(state: AppState) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "service": crate::SERVICE,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": state.started.elapsed().as_millis() as u64,
    }))
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// Ready when NATS is connected and the services the api depends on answer their probes.
async fn readyz(state: AppState) -> Response {
    use proto::Message as _;
    let connected = state.nats.connection_state() == async_nats::connection::State::Connected;
    let mut services = serde_json::Map::new();
    let mut ready = connected;
    let mut degraded = false;
    let probes = SERVICES.map(|(service, _)| {
        let nats = state.nats.clone();
        async move {
            let ask = nats.request(
                subjects::health_subject(service),
                proto::HealthRequest {}.encode_to_vec().into(),
            );
            match tokio::time::timeout(Duration::from_secs(1), ask).await {
                Ok(Ok(reply)) => match proto::HealthReply::decode(reply.payload) {
                    Ok(h) => json!({
                        "ok": h.ok,
                        "detail": h.detail,
                        "uptime_ms": h.uptime_ms,
                        "backlogs": h.backlogs.iter().map(backlog_json).collect::<Vec<_>>(),
                    }),
                    Err(_) => {
                        json!({"ok": false, "detail": "unreadable health reply", "backlogs": []})
                    }
                },
                Ok(Err(_)) => json!({"ok": false, "detail": "not running", "backlogs": []}),
                Err(_) => json!({"ok": false, "detail": "no answer within 1s", "backlogs": []}),
            }
        }
    });
    let answers = futures::future::join_all(probes).await;
    for ((service, required), answer) in SERVICES.iter().zip(answers) {
        if answer["ok"] != true {
            if *required {
                ready = false;
            } else {
                degraded = true;
            }
        }
        services.insert((*service).to_owned(), answer);
    }
    let status = match (ready, degraded) {
        (false, _) => "unavailable",
        (true, true) => "degraded",
        (true, false) => "ready",
    };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        axum::Json(
            json!({"status": status, "nats": {"connected": connected}, "services": services}),
        ),
    )
        .into_response()
}

/// One queue of work behind a service, as `/readyz` lists it: `eta_ms` is 0 when it is done and
/// -1 when nothing moves to estimate from.
fn backlog_json(backlog: &proto::Backlog) -> Value {
    json!({
        "name": backlog.name,
        "done": backlog.done,
        "total": backlog.total,
        "rate_per_s": finite(backlog.rate_per_s),
        "eta_ms": backlog.eta_ms,
    })
}

async fn metrics(state: AppState) -> Response {
    let mut extra = Vec::new();
    let size = state.store_size().await;
    let connected =
        i64::from(state.nats.connection_state() == async_nats::connection::State::Connected);
    extra.push((
        "mneme_nats_connected",
        "Whether the api is connected to NATS.",
        connected,
    ));
    extra.push((
        "mneme_store_size_bytes",
        "Bytes the store takes on disk.",
        size as i64,
    ));
    extra.push((
        "mneme_api_uptime_seconds",
        "Seconds since the api started.",
        state.started.elapsed().as_secs() as i64,
    ));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(&extra),
    )
        .into_response()
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document().to_string(),
    )
        .into_response()
}

/// Split a comma-separated parameter into its non-empty parts.
fn csv(value: &Option<String>) -> Vec<String> {
    value
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

fn bounded(name: &str, value: Option<u32>, default: u32, max: u32) -> ApiResult<u32> {
    match value {
        None => Ok(default),
        Some(v) if (1..=max).contains(&v) => Ok(v),
        Some(_) => Err(ApiError::invalid(
            "invalid_parameter",
            format!("{name} must be between 1 and {max}"),
        )),
    }
}

pub(crate) fn text_param(name: &str, value: &Option<String>, max: usize) -> ApiResult<String> {
    let value = value.clone().unwrap_or_default();
    if value.chars().count() > max {
        return Err(ApiError::invalid(
            "invalid_parameter",
            format!("{name} is longer than {max} characters"),
        ));
    }
    Ok(value)
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    q: Option<String>,
    project: Option<String>,
    session: Option<String>,
    exclude_session: Option<String>,
    kind: Option<String>,
    file: Option<String>,
    concept: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    mode: Option<String>,
    limit: Option<u32>,
    min_relevance: Option<f64>,
    boost_project: Option<bool>,
    group: Option<String>,
    as_of: Option<i64>,
    rewrite: Option<bool>,
}

/// Build retrieval's search request from query parameters (shared with the MCP tools).
pub fn search_request(query: SearchParams) -> ApiResult<proto::SearchRequest> {
    let q = query.q.trim().to_owned();
    if q.is_empty() {
        return Err(ApiError::invalid(
            "missing_parameter",
            "q (what to search for) is required",
        ));
    }
    if q.chars().count() > 1000 {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "q is longer than 1000 characters",
        ));
    }
    let mode = query.mode.unwrap_or_else(|| "hybrid".to_owned());
    if !matches!(mode.as_str(), "hybrid" | "fts" | "vector") {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "mode must be hybrid, fts or vector",
        ));
    }
    let min_relevance = query.min_relevance.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&min_relevance) {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "min_relevance must be between 0 and 1",
        ));
    }
    let group = query.group.unwrap_or_default();
    if !matches!(group.as_str(), "" | "session") {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "group must be session",
        ));
    }
    for (name, value) in [
        ("since", query.since),
        ("until", query.until),
        ("as_of", query.as_of),
    ] {
        if value.is_some_and(|v| v < 0) {
            return Err(ApiError::invalid(
                "invalid_parameter",
                format!("{name} must be Unix milliseconds"),
            ));
        }
    }
    Ok(proto::SearchRequest {
        query: q,
        project: query.project,
        limit: bounded("limit", query.limit, 20, 200)?,
        sessions: query.sessions,
        exclude_sessions: query.exclude_sessions,
        kinds: query.kinds,
        file: query.file,
        concept: query.concept,
        since_ms: query.since.unwrap_or(0),
        until_ms: query.until.unwrap_or(0),
        mode,
        min_relevance,
        boost_project: query.boost_project,
        group,
        as_of_ms: query.as_of.unwrap_or(0),
        rewrite: query.rewrite,
    })
}

/// A search, whichever door it came through.
#[derive(Debug, Default)]
pub struct SearchParams {
    pub q: String,
    pub project: String,
    pub sessions: Vec<String>,
    pub exclude_sessions: Vec<String>,
    pub kinds: Vec<String>,
    pub file: String,
    pub concept: String,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub mode: Option<String>,
    pub limit: Option<u32>,
    pub min_relevance: Option<f64>,
    pub boost_project: bool,
    /// `session` to answer with sessions rather than items.
    pub group: Option<String>,
    /// When the question is asked (Unix ms), for the time words in it.
    pub as_of: Option<i64>,
    /// Also search the LLM's other wordings of the query.
    pub rewrite: bool,
}

/// Ask retrieval to search, and turn its answer into JSON.
pub async fn run_search(state: &State, request: proto::SearchRequest) -> ApiResult<Value> {
    let reply: proto::SearchReply = if request.rewrite {
        // Retrieval waits up to ten seconds for the LLM's wordings before it searches.
        state
            .ask_within(
                "retrieval",
                subjects::RETRIEVAL_SEARCH,
                &request,
                std::time::Duration::from_secs(20),
            )
            .await?
    } else {
        state
            .ask("retrieval", subjects::RETRIEVAL_SEARCH, &request)
            .await?
    };
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "retrieval could not search: {}",
            reply.error
        )));
    }
    let mut found = json!({
        "query": request.query,
        "mode": reply.mode,
        "hits": reply.hits.iter().map(hit_json).collect::<Vec<_>>(),
    });
    if request.group == "session" {
        found["sessions"] = Value::Array(session_groups(&reply.hits));
    }
    if request.rewrite {
        found["rewrites"] = json!(reply.rewrites);
        found["rewrite_error"] = json!(reply.rewrite_error);
    }
    Ok(found)
}

/// The hits of a search grouped by session, which retrieval sends session by session (each
/// session's hits together, best session first, every hit with its session's score).
pub fn session_groups(hits: &[proto::SearchHit]) -> Vec<Value> {
    hits.chunk_by(|a, b| a.session_id == b.session_id)
        .map(|run| {
            json!({
                "session_id": run[0].session_id,
                "project": run[0].project,
                "score": finite(run[0].score),
                "hits": run.iter().map(hit_json).collect::<Vec<_>>(),
            })
        })
        .collect()
}

async fn search(state: AppState, Query(query): Query<SearchQuery>) -> ApiResult<Json<Value>> {
    let params = SearchParams {
        q: text_param("q", &query.q, 4000)?,
        project: text_param("project", &query.project, 4096)?,
        sessions: csv(&query.session),
        exclude_sessions: csv(&query.exclude_session),
        kinds: csv(&query.kind),
        file: text_param("file", &query.file, 4096)?,
        concept: text_param("concept", &query.concept, 200)?,
        since: query.since,
        until: query.until,
        mode: query.mode,
        limit: query.limit,
        min_relevance: query.min_relevance,
        boost_project: query.boost_project.unwrap_or(false),
        group: query.group,
        as_of: query.as_of,
        rewrite: query.rewrite.unwrap_or(false),
    };
    let request = search_request(params)?;
    Ok(Json(run_search(&state, request).await?))
}

/// One search hit as JSON.
pub fn hit_json(hit: &proto::SearchHit) -> Value {
    json!({
        "id": hit.id,
        "session_id": hit.session_id,
        "project": hit.project,
        "kind": hit.kind,
        "title": hit.title,
        "snippet": hit.snippet,
        "occurred_at_ms": hit.occurred_at_ms,
        "score": finite(hit.score),
        "relevance": finite(hit.relevance),
        "found_by": hit.found_by,
        "origin": hit.origin,
    })
}

fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// One whole memory item as JSON.
pub fn item_json(item: &proto::Item) -> Value {
    json!({
        "id": item.id,
        "kind": item.kind,
        "session_id": item.session_id,
        "project": item.project,
        "agent": item.agent,
        "title": item.title,
        "text": item.text,
        "tool_name": item.tool_name,
        "files": item.files,
        "concepts": item.concepts,
        "occurred_at_ms": item.occurred_at_ms,
        "source": item.source,
        "source_id": item.source_id,
        "input": item.input,
        "output": item.output,
    })
}

#[derive(Debug, Deserialize)]
struct TimelineQuery {
    radius: Option<u32>,
}

fn positive_id(id: i64) -> ApiResult<i64> {
    if id > 0 {
        Ok(id)
    } else {
        Err(ApiError::invalid(
            "invalid_path",
            "ids are positive integers",
        ))
    }
}

/// The items around one item, from retrieval.
pub async fn run_timeline(state: &State, id: i64, radius: u32) -> ApiResult<Value> {
    let reply: proto::ItemsReply = state
        .ask(
            "retrieval",
            subjects::RETRIEVAL_TIMELINE,
            &proto::TimelineRequest { id, radius },
        )
        .await?;
    if reply.error.starts_with("no memory item") {
        return Err(ApiError::not_found(format!("no memory item {id}")));
    }
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "retrieval could not answer: {}",
            reply.error
        )));
    }
    Ok(json!({
        "anchor": reply.anchor,
        "items": reply.items.iter().map(item_json).collect::<Vec<_>>(),
    }))
}

async fn timeline(
    state: AppState,
    Path(id): Path<i64>,
    Query(query): Query<TimelineQuery>,
) -> ApiResult<Json<Value>> {
    let id = positive_id(id)?;
    let radius = match query.radius {
        None => 5,
        Some(r) if r <= 50 => r,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_parameter",
                "radius must be between 0 and 50",
            ));
        }
    };
    Ok(Json(run_timeline(&state, id, radius).await?))
}

#[derive(Debug, Deserialize)]
struct ItemsQuery {
    ids: Option<String>,
}

/// Whole items by id, from retrieval.
pub async fn run_get(state: &State, ids: Vec<i64>) -> ApiResult<Vec<proto::Item>> {
    let reply: proto::ItemsReply = state
        .ask(
            "retrieval",
            subjects::RETRIEVAL_GET,
            &proto::GetRequest { ids },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "retrieval could not answer: {}",
            reply.error
        )));
    }
    Ok(reply.items)
}

async fn items(state: AppState, Query(query): Query<ItemsQuery>) -> ApiResult<Json<Value>> {
    let mut ids = Vec::new();
    for part in csv(&query.ids) {
        let id = part
            .parse::<i64>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid_parameter",
                    format!("ids must be positive integers separated by commas, not {part:?}"),
                )
            })?;
        ids.push(id);
    }
    if ids.is_empty() || ids.len() > 100 {
        return Err(ApiError::invalid(
            "missing_parameter",
            "ids: between 1 and 100 item ids separated by commas",
        ));
    }
    let items = run_get(&state, ids).await?;
    Ok(Json(
        json!({"items": items.iter().map(item_json).collect::<Vec<_>>()}),
    ))
}

async fn item(state: AppState, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    let id = positive_id(id)?;
    let items = run_get(&state, vec![id]).await?;
    match items.first() {
        Some(item) => Ok(Json(item_json(item))),
        None => Err(ApiError::not_found(format!("no memory item {id}"))),
    }
}

#[derive(Debug, Deserialize)]
struct SessionsQuery {
    project: Option<String>,
    archived: Option<String>,
    summaries: Option<bool>,
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn sessions(state: AppState, Query(query): Query<SessionsQuery>) -> ApiResult<Json<Value>> {
    let archived = match query.archived.as_deref() {
        None | Some("false") => Archived::Hide,
        Some("true" | "only") => Archived::Only,
        Some("all") => Archived::Include,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_parameter",
                "archived must be false, true or all",
            ));
        }
    };
    let project = text_param("project", &query.project, 4096)?;
    let limit = bounded("limit", query.limit, 50, 500)?;
    let offset = offset(query.offset)?;
    let pool = state.pool().await?;
    if query.summaries == Some(true) {
        let page =
            archive::sessions::sessions_with_summaries(&pool, &project, archived, limit, offset)
                .await?;
        return Ok(Json(as_json(&page)?));
    }
    let page = archive::sessions(&pool, &project, archived, limit, offset).await?;
    Ok(Json(as_json(&page)?))
}

/// A read model as a JSON value, to answer with or to add to: its keys come out in the order
/// the model declares them (sorted, when serde_json sorts keys), as from `json!` in that order.
pub fn as_json(model: &impl serde::Serialize) -> ApiResult<Value> {
    serde_json::to_value(model).map_err(|e| ApiError::internal("writing the answer", e))
}

fn offset(value: Option<u32>) -> ApiResult<u32> {
    match value {
        Some(v) if v > 1_000_000 => Err(ApiError::invalid(
            "invalid_parameter",
            "offset must be at most 1000000",
        )),
        v => Ok(v.unwrap_or(0)),
    }
}

fn session_id(id: &str) -> ApiResult<&str> {
    if id.is_empty() || id.chars().count() > 256 || id.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "invalid_path",
            "a session id is 1 to 256 printable characters",
        ));
    }
    Ok(id)
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn session(
    state: AppState,
    Path(id): Path<String>,
    Query(query): Query<SessionQuery>,
) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    let limit = bounded("limit", query.limit, 200, 1000)?;
    let offset = offset(query.offset)?;
    let pool = state.pool().await?;
    match archive::session(&pool, id, limit, offset).await? {
        Some(session) => Ok(Json(as_json(&session)?)),
        None => Err(ApiError::not_found(format!("no session {id:?}"))),
    }
}

async fn change_session(state: &State, id: &str, unarchive: bool) -> ApiResult<Json<Value>> {
    let id = session_id(id)?;
    let reply: proto::SessionsChangedReply = state
        .ask(
            "ingest",
            subjects::SESSIONS_ARCHIVE,
            &proto::ArchiveSessionsRequest {
                session_ids: vec![id.to_owned()],
                unarchive,
            },
        )
        .await?;
    sessions_changed(id, &reply)?;
    Ok(Json(json!({"session_id": id, "archived": !unarchive})))
}

fn sessions_changed(id: &str, reply: &proto::SessionsChangedReply) -> ApiResult<()> {
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "ingest could not change the session: {}",
            reply.error
        )));
    }
    if reply.sessions == 0 {
        return Err(ApiError::not_found(format!("no session {id:?}")));
    }
    Ok(())
}

async fn archive_session(state: AppState, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    change_session(&state, &id, false).await
}

async fn unarchive_session(state: AppState, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    change_session(&state, &id, true).await
}

/// Delete a session: ingest deletes what it stored, then retrieval forgets the memory made of
/// it, so nothing of the session is found again. The compressor and the pattern service drop
/// their rows on ingest's notice of the delete, a moment later.
async fn delete_session(state: AppState, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = session_id(&id)?;
    // Counted first: retrieval may forget the items on ingest's notice before this request's
    // own forget reaches it, which then finds none left.
    let held = archive::session_item_count(&state.pool().await?, id).await?;
    let reply: proto::SessionsChangedReply = state
        .ask(
            "ingest",
            subjects::SESSIONS_DELETE,
            &proto::DeleteSessionsRequest {
                session_ids: vec![id.to_owned()],
            },
        )
        .await?;
    sessions_changed(id, &reply)?;
    let forgot: proto::ForgetReply = state
        .ask(
            "retrieval",
            subjects::RETRIEVAL_FORGET,
            &proto::ForgetRequest {
                session_ids: vec![id.to_owned()],
            },
        )
        .await?;
    if !forgot.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "the session was deleted, but retrieval could not forget its memory: {}; retry the delete",
            forgot.error
        )));
    }
    Ok(Json(json!({
        "session_id": id,
        "deleted": true,
        "observations": reply.observations,
        "memory_items": forgot.items.max(held.max(0) as u64),
    })))
}

#[derive(Debug, Deserialize)]
struct PatternsQuery {
    project: Option<String>,
    kind: Option<String>,
    min_occurrences: Option<u32>,
    limit: Option<u32>,
    offset: Option<u32>,
}

/// The kinds of pattern the pattern service finds.
pub const PATTERN_KINDS: [&str; 8] = [
    "error",
    "fix",
    "decision",
    "preference",
    "architecture",
    "procedure",
    "workflow",
    "reflection",
];

async fn patterns(state: AppState, Query(query): Query<PatternsQuery>) -> ApiResult<Json<Value>> {
    let kind = query.kind.clone().unwrap_or_default();
    if !kind.is_empty() && !PATTERN_KINDS.contains(&kind.as_str()) {
        return Err(ApiError::invalid(
            "invalid_parameter",
            format!("kind must be one of {}", PATTERN_KINDS.join(", ")),
        ));
    }
    let project = text_param("project", &query.project, 4096)?;
    let min = query.min_occurrences.unwrap_or(1).min(1_000_000);
    let limit = bounded("limit", query.limit, 50, 500)?;
    let offset = offset(query.offset)?;
    let pool = state.pool().await?;
    let page = archive::patterns(&pool, &project, &kind, min, limit, offset).await?;
    Ok(Json(as_json(&page)?))
}

#[derive(Debug, Deserialize)]
struct CheckpointsQuery {
    project: Option<String>,
    session: Option<String>,
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn checkpoints(
    state: AppState,
    Query(query): Query<CheckpointsQuery>,
) -> ApiResult<Json<Value>> {
    let project = text_param("project", &query.project, 4096)?;
    let session = text_param("session", &query.session, 256)?;
    let limit = bounded("limit", query.limit, 50, 500)?;
    let offset = offset(query.offset)?;
    let pool = state.pool().await?;
    let page = archive::checkpoints(&pool, &project, &session, limit, offset).await?;
    Ok(Json(as_json(&page)?))
}

#[derive(Debug, Deserialize)]
struct StatsQuery {
    days: Option<u32>,
}

async fn stats(state: AppState, Query(query): Query<StatsQuery>) -> ApiResult<Json<Value>> {
    let days = bounded("days", query.days, 30, 3650)?;
    let pool = state.pool().await?;
    let mut stats = as_json(&archive::stats(&pool, days).await?)?;
    stats["store"] = json!({"size_bytes": state.store_size().await});
    Ok(Json(stats))
}

async fn post_events(state: AppState, Json(body): Json<Value>) -> ApiResult<Response> {
    let accepted = events::accept(&state, body).await?;
    let body = json!({
        "accepted": accepted.iter().map(|e| json!({"id": e.id, "subject": e.subject()})).collect::<Vec<_>>(),
    });
    Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
}
