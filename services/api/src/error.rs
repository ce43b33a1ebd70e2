//! The one error shape every endpoint answers with: a status, a stable machine-readable code and
//! a readable message, as `{"error": {"code": …, "message": …}}`. Server-side failures are logged
//! in full and answered with a generic message, so internals never reach a client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable code clients branch on (`invalid_query`, `not_found`, `token_required`, …).
    pub code: &'static str,
    pub message: String,
    /// Seconds to wait before retrying, for 429 answers.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: a parameter is malformed or out of range.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 422: the body parsed but does not describe something valid.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 503: a service behind the api (or NATS, or the store) cannot answer now.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            message,
        )
    }

    /// 500: something failed on our side. The cause is logged here, never sent.
    pub fn internal(what: &str, cause: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "{what} failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{what} failed; the api's log has the details"),
        )
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> ApiError {
        ApiError::internal("reading the store", error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": {"code": self.code, "message": self.message}}));
        let mut response = (self.status, body).into_response();
        if let Some(seconds) = self.retry_after
            && let Ok(value) = seconds.to_string().parse()
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, value);
        }
        response
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;
