//! Collections over REST (`/v1/collections`), answered by retrieval, which owns them: create
//! from a search or a list of item ids, list, read, export as Markdown, JSON or plain text,
//! ask a question over one, delete. The MCP tools call the same functions.

use crate::State;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Path, Query};
use crate::rest::{self, SearchParams};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use proto::subjects;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::Arc;

type AppState = axum::extract::State<Arc<State>>;

/// Every route of this module.
pub fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/v1/collections", get(list).post(create))
        .route("/v1/collections/{id}", get(one).delete(delete))
        .route("/v1/collections/{id}/export", get(export))
        .route("/v1/collections/{id}/ask", get(ask))
}

/// What a collection is made from, whichever door the request came through.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateIn {
    pub name: String,
    pub description: Option<String>,
    /// Make it from the hits of this search ...
    pub query: Option<String>,
    pub project: Option<String>,
    pub kinds: Option<Vec<String>>,
    pub file: Option<String>,
    pub concept: Option<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub mode: Option<String>,
    pub limit: Option<u32>,
    pub min_relevance: Option<f64>,
    /// ... or of these items.
    pub item_ids: Option<Vec<i64>>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid_collection", message)
}

/// A refusal from retrieval, as the error its code names.
fn refused(error: String, code: &str) -> ApiError {
    match code {
        "not_found" => ApiError::not_found(error),
        "invalid" => invalid(error),
        "conflict" => ApiError::new(StatusCode::CONFLICT, "collection_exists", error),
        _ => ApiError::unavailable(format!("retrieval could not answer: {error}")),
    }
}

/// Create a collection; the answer is the collection, with its item count.
pub async fn run_create(state: &State, input: CreateIn) -> ApiResult<proto::Collection> {
    let name = input.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(invalid("name: 1 to 200 printable characters"));
    }
    let description = input.description.unwrap_or_default();
    if description.chars().count() > 4000 {
        return Err(invalid("description is longer than 4000 characters"));
    }
    let (search, item_ids) = match (input.query, input.item_ids) {
        (Some(q), None) => {
            let request = rest::search_request(SearchParams {
                q,
                project: input.project.unwrap_or_default(),
                kinds: input.kinds.unwrap_or_default(),
                file: input.file.unwrap_or_default(),
                concept: input.concept.unwrap_or_default(),
                since: input.since,
                until: input.until,
                mode: input.mode,
                limit: input.limit,
                min_relevance: input.min_relevance,
                ..Default::default()
            })
            .map_err(|e| invalid(e.message))?;
            (Some(request), Vec::new())
        }
        (None, Some(ids)) => {
            if ids.is_empty() || ids.len() > 1000 {
                return Err(invalid("item_ids: between 1 and 1000 item ids"));
            }
            if ids.iter().any(|id| *id <= 0) {
                return Err(invalid("item ids are positive integers"));
            }
            (None, ids)
        }
        _ => {
            return Err(invalid(
                "give either query (a search to collect the hits of) or item_ids",
            ));
        }
    };
    let reply: proto::CollectionReply = state
        .ask(
            "retrieval",
            subjects::COLLECTIONS_CREATE,
            &proto::CreateCollectionRequest {
                name,
                description,
                search,
                item_ids,
                ..Default::default()
            },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(refused(reply.error, &reply.error_code));
    }
    reply
        .collection
        .ok_or_else(|| ApiError::internal("creating a collection", "retrieval sent no collection"))
}

/// A page of collections and the total.
pub async fn run_list(state: &State, limit: u32, offset: u32) -> ApiResult<Value> {
    let reply: proto::CollectionsReply = state
        .ask(
            "retrieval",
            subjects::COLLECTIONS_LIST,
            &proto::ListCollectionsRequest { limit, offset },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(refused(reply.error, ""));
    }
    Ok(json!({
        "total": reply.total,
        "limit": limit,
        "offset": offset,
        "collections": reply.collections.iter().map(collection_json).collect::<Vec<_>>(),
    }))
}

/// One collection with its whole items.
pub async fn run_get(state: &State, id: i64) -> ApiResult<(proto::Collection, Vec<proto::Item>)> {
    let reply: proto::CollectionReply = state
        .ask(
            "retrieval",
            subjects::COLLECTIONS_GET,
            &proto::CollectionRequest { id },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(refused(reply.error, &reply.error_code));
    }
    let collection = reply.collection.ok_or_else(|| {
        ApiError::internal("reading a collection", "retrieval sent no collection")
    })?;
    Ok((collection, reply.items))
}

/// The items of a collection most relevant to a question.
pub async fn run_ask(state: &State, id: i64, question: &str, limit: u32) -> ApiResult<Value> {
    let question = question.trim();
    if question.is_empty() || question.chars().count() > 1000 {
        return Err(ApiError::invalid(
            "missing_parameter",
            "q (the question) is 1 to 1000 characters",
        ));
    }
    let reply: proto::AskCollectionReply = state
        .ask(
            "retrieval",
            subjects::COLLECTIONS_ASK,
            &proto::AskCollectionRequest {
                id,
                question: question.to_owned(),
                limit,
            },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(refused(reply.error, &reply.error_code));
    }
    Ok(json!({
        "collection": reply.collection.as_ref().map(collection_json),
        "question": question,
        "mode": reply.mode,
        "hits": reply.hits.iter().map(rest::hit_json).collect::<Vec<_>>(),
    }))
}

pub fn collection_json(c: &proto::Collection) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "description": c.description,
        "query": c.query,
        "items": c.items,
        "created_at_ms": c.created_at_ms,
        "updated_at_ms": c.updated_at_ms,
    })
}

/// The formats a collection exports to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
    Text,
}

impl Format {
    pub fn parse(name: Option<&str>) -> ApiResult<Format> {
        match name.unwrap_or("markdown") {
            "markdown" | "md" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            "text" | "txt" => Ok(Format::Text),
            _ => Err(ApiError::invalid(
                "invalid_parameter",
                "format must be markdown, json or text",
            )),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Markdown => "text/markdown; charset=utf-8",
            Format::Json => "application/json",
            Format::Text => "text/plain; charset=utf-8",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
            Format::Text => "txt",
        }
    }
}

/// A collection and its items in one format.
pub fn render(collection: &proto::Collection, items: &[proto::Item], format: Format) -> String {
    let origin = if collection.query.is_empty() {
        String::new()
    } else {
        format!(", from the search \"{}\"", collection.query)
    };
    match format {
        Format::Json => {
            let body = json!({
                "collection": collection_json(collection),
                "items": items.iter().map(rest::item_json).collect::<Vec<_>>(),
            });
            serde_json::to_string_pretty(&body).unwrap_or_default()
        }
        Format::Markdown => {
            let mut out = format!("# {}\n\n", collection.name);
            if !collection.description.is_empty() {
                let _ = write!(out, "{}\n\n", collection.description);
            }
            let _ = writeln!(out, "_{} items{origin}._", items.len());
            for item in items {
                let _ = write!(
                    out,
                    "\n## {}\n\n- #{} {} · {} · session `{}` · {}\n",
                    one_line(&item.title),
                    item.id,
                    item.kind,
                    common::time::utc_day(item.occurred_at_ms),
                    item.session_id,
                    item.project,
                );
                if !item.files.is_empty() {
                    let _ = writeln!(out, "- files: {}", item.files.join(", "));
                }
                if !item.concepts.is_empty() {
                    let _ = writeln!(out, "- concepts: {}", item.concepts.join(", "));
                }
                let _ = write!(out, "\n{}\n", item.text.trim_end());
            }
            out
        }
        Format::Text => {
            let mut out = format!(
                "{}\n{}\n",
                collection.name,
                "=".repeat(collection.name.chars().count())
            );
            if !collection.description.is_empty() {
                let _ = writeln!(out, "{}", collection.description);
            }
            let _ = writeln!(out, "{} items{origin}.", items.len());
            for item in items {
                let _ = write!(
                    out,
                    "\n#{} [{}] {} {}\n{}\n",
                    item.id,
                    item.kind,
                    common::time::utc_day(item.occurred_at_ms),
                    one_line(&item.title),
                    item.text.trim_end(),
                );
            }
            out
        }
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn positive(id: i64) -> ApiResult<i64> {
    if id > 0 {
        Ok(id)
    } else {
        Err(ApiError::invalid(
            "invalid_path",
            "collection ids are positive integers",
        ))
    }
}

async fn create(state: AppState, Json(input): Json<CreateIn>) -> ApiResult<Response> {
    let collection = run_create(&state, input).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(collection_json(&collection)),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<u32>,
    offset: Option<u32>,
}

async fn list(state: AppState, Query(query): Query<ListQuery>) -> ApiResult<Json<Value>> {
    let limit = match query.limit {
        None => 50,
        Some(n @ 1..=500) => n,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_parameter",
                "limit must be between 1 and 500",
            ));
        }
    };
    let offset = query.offset.unwrap_or(0);
    if offset > 1_000_000 {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "offset must be at most 1000000",
        ));
    }
    Ok(Json(run_list(&state, limit, offset).await?))
}

async fn one(state: AppState, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    let (collection, items) = run_get(&state, positive(id)?).await?;
    let mut body = collection_json(&collection);
    body["item_list"] = items.iter().map(rest::item_json).collect();
    Ok(Json(body))
}

async fn delete(state: AppState, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    let id = positive(id)?;
    let reply: proto::CollectionReply = state
        .ask(
            "retrieval",
            subjects::COLLECTIONS_DELETE,
            &proto::CollectionRequest { id },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(refused(reply.error, &reply.error_code));
    }
    Ok(Json(json!({"id": id, "deleted": true})))
}

#[derive(Debug, Deserialize)]
struct ExportQuery {
    format: Option<String>,
}

async fn export(
    state: AppState,
    Path(id): Path<i64>,
    Query(query): Query<ExportQuery>,
) -> ApiResult<Response> {
    let format = Format::parse(query.format.as_deref())?;
    let (collection, items) = run_get(&state, positive(id)?).await?;
    let disposition = format!(
        "inline; filename=\"collection-{}.{}\"",
        collection.id,
        format.extension()
    );
    Ok((
        [
            (header::CONTENT_TYPE, format.content_type().to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        render(&collection, &items, format),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
struct AskQuery {
    q: Option<String>,
    limit: Option<u32>,
}

async fn ask(
    state: AppState,
    Path(id): Path<i64>,
    Query(query): Query<AskQuery>,
) -> ApiResult<Json<Value>> {
    let limit = match query.limit {
        None => 5,
        Some(n @ 1..=50) => n,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_parameter",
                "limit must be between 1 and 50",
            ));
        }
    };
    let question = query.q.unwrap_or_default();
    Ok(Json(
        run_ask(&state, positive(id)?, &question, limit).await?,
    ))
}
