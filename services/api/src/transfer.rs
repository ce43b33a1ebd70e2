//! Export and import of all memory as JSON lines, and the retention policy.
//!
//! `GET /v1/export` streams the archive `archive::export_lines` reads from the store (opened
//! read-only, a page at a time, like the api's other lists): a header, every session,
//! observation, memory item and collection, then an `end` line with the counts, so a file
//! without it was cut short.
//!
//! `POST /v1/import` feeds the body, as it arrives, to an `archive::Importer`, which hands its
//! rows to their owners (ingest and retrieval) over NATS in batches and scrubs every text of
//! secrets on the way in, as HTTP events are. Importing a file twice doubles nothing, and a
//! file with a bad line is imported up to that line.
//!
//! `GET`/`PUT /v1/retention` and `POST /v1/retention/apply` read, set and apply the policy,
//! which ingest keeps and applies.

use crate::State;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use archive::ImportError;
use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use proto::subjects;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

type AppState = axum::extract::State<Arc<State>>;

/// Every route of this module.
pub fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/v1/export", get(export))
        .route("/v1/import", post(import))
        .route("/v1/retention", get(retention).put(set_retention))
        .route("/v1/retention/apply", post(apply_retention))
}

async fn export(state: AppState) -> ApiResult<Response> {
    let pool = state.pool().await?;
    let body = archive::export_lines(pool).scan((), |_, chunk| {
        futures::future::ready(match chunk {
            Ok(chunk) => Some(Ok::<_, std::io::Error>(chunk)),
            Err(error) => {
                // The status is sent already; ending without the `end` line tells the reader
                // the file is incomplete.
                tracing::error!(%error, "export failed midway");
                None
            }
        })
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"mneme-export.jsonl\"",
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

impl From<ImportError> for ApiError {
    fn from(error: ImportError) -> ApiError {
        let code = error.code();
        match error {
            ImportError::Invalid(message) | ImportError::Unsupported(message) => {
                ApiError::unprocessable(code, message)
            }
            ImportError::TooLarge(message) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
            }
            ImportError::Unavailable(message) => ApiError::unavailable(message),
            ImportError::Unreadable { service, source } => {
                ApiError::internal(&format!("reading {service}'s reply"), source)
            }
        }
    }
}

async fn import(state: AppState, body: Body) -> ApiResult<Json<Value>> {
    let mut importer = archive::Importer::new(&state.nats, &state.sanitizer);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            ApiError::invalid(
                "invalid_body",
                format!("the body could not be read: {error}"),
            )
        })?;
        importer.feed(&chunk).await?;
    }
    let imported = importer.finish().await?;
    Ok(Json(crate::rest::as_json(&imported)?))
}

fn retention_json(reply: &proto::RetentionReply) -> Value {
    let settings = reply.settings.clone().unwrap_or_default();
    json!({
        "archive_after_days": settings.archive_after_days,
        "delete_archived_after_days": settings.delete_archived_after_days,
        "updated_at_ms": settings.updated_at_ms,
        "last_run": {
            "at_ms": settings.last_run_at_ms,
            "archived": settings.last_archived,
            "deleted": settings.last_deleted,
            "error": settings.last_error,
        },
    })
}

async fn ask_retention(
    state: &State,
    subject: &str,
    request: &impl proto::Message,
) -> ApiResult<proto::RetentionReply> {
    let reply: proto::RetentionReply = state.ask("ingest", subject, request).await?;
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "ingest could not answer: {}",
            reply.error
        )));
    }
    Ok(reply)
}

async fn retention(state: AppState) -> ApiResult<Json<Value>> {
    let reply = ask_retention(
        &state,
        subjects::RETENTION_GET,
        &proto::RetentionGetRequest {},
    )
    .await?;
    Ok(Json(retention_json(&reply)))
}

/// A new policy; a field left out keeps its current value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionIn {
    archive_after_days: Option<u32>,
    delete_archived_after_days: Option<u32>,
}

/// The answer of a run: the policy and what this run changed.
fn run_json(reply: &proto::RetentionReply) -> Value {
    let mut body = retention_json(reply);
    body["applied"] = json!({"archived": reply.archived, "deleted": reply.deleted});
    body
}

async fn set_retention(state: AppState, Json(input): Json<RetentionIn>) -> ApiResult<Json<Value>> {
    for (name, value) in [
        ("archive_after_days", input.archive_after_days),
        (
            "delete_archived_after_days",
            input.delete_archived_after_days,
        ),
    ] {
        if value.is_some_and(|v| v > 36_500) {
            return Err(ApiError::unprocessable(
                "invalid_retention",
                format!("{name} must be between 0 (never) and 36500"),
            ));
        }
    }
    let current = ask_retention(
        &state,
        subjects::RETENTION_GET,
        &proto::RetentionGetRequest {},
    )
    .await?
    .settings
    .unwrap_or_default();
    let request = proto::RetentionSetRequest {
        archive_after_days: input
            .archive_after_days
            .unwrap_or(current.archive_after_days),
        delete_archived_after_days: input
            .delete_archived_after_days
            .unwrap_or(current.delete_archived_after_days),
    };
    let reply = ask_retention(&state, subjects::RETENTION_SET, &request).await?;
    Ok(Json(run_json(&reply)))
}

async fn apply_retention(state: AppState) -> ApiResult<Json<Value>> {
    let reply = ask_retention(
        &state,
        subjects::RETENTION_APPLY,
        &proto::RetentionApplyRequest {},
    )
    .await?;
    Ok(Json(run_json(&reply)))
}
