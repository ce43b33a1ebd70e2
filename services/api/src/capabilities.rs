//! The capability registry at the front door, answered by retrieval, which holds the copy it
//! matches prompts against: what it holds (`GET /v1/capabilities`) and what a prompt would be
//! given (`GET /v1/capabilities/match`). The registry is changed through its files
//! (`mneme capabilities`), which a person reads and edits, never here. The MCP tools call the
//! same functions.

use crate::State;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query};
use axum::Router;
use axum::routing::get;
use proto::subjects;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

type AppState = axum::extract::State<Arc<State>>;

/// Every route of this module.
pub fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/v1/capabilities", get(list))
        .route("/v1/capabilities/match", get(matches))
}

fn capability_json(c: &proto::Capability, scope: &str) -> Value {
    json!({
        "id": c.id, "name": c.name, "category": c.category, "kind": c.kind,
        "description": c.description, "when": c.when, "invoke": c.invoke, "source": c.source,
        "scope": if scope.is_empty() { "user" } else { scope },
    })
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    /// A project's directory: its capabilities and the user's.
    project: Option<String>,
}

/// The capabilities retrieval holds: the user's, and a project's when one is named.
pub async fn run_list(state: &State, project: &str) -> ApiResult<Value> {
    let reply: proto::ListCapabilitiesReply = state
        .ask(
            "retrieval",
            subjects::CAPABILITIES_LIST,
            &proto::ListCapabilitiesRequest {
                scope: String::new(),
                all: true,
            },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "retrieval could not list capabilities: {}",
            reply.error
        )));
    }
    let listed: Vec<Value> = reply
        .capabilities
        .iter()
        .filter(|m| m.scope.is_empty() || (!project.is_empty() && m.scope == project))
        .filter_map(|m| Some(capability_json(m.capability.as_ref()?, &m.scope)))
        .collect();
    Ok(json!({"capabilities": listed}))
}

async fn list(state: AppState, Query(query): Query<ListQuery>) -> ApiResult<Json<Value>> {
    let project = crate::rest::text_param("project", &query.project, 4096)?;
    Ok(Json(run_list(&state, &project).await?))
}

#[derive(Debug, Deserialize)]
struct MatchQuery {
    prompt: Option<String>,
    project: Option<String>,
    strategy: Option<String>,
}

/// What `prompt` in `project` would be given: the matches, best first, with their scores (an
/// empty list when nothing clears the threshold).
pub async fn run_match(
    state: &State,
    prompt: &str,
    project: &str,
    strategy: &str,
) -> ApiResult<Value> {
    if prompt.trim().is_empty() {
        return Err(ApiError::invalid("missing_parameter", "prompt is required"));
    }
    if !matches!(strategy, "" | "flat" | "two-stage") {
        return Err(ApiError::invalid(
            "invalid_parameter",
            "strategy must be flat or two-stage",
        ));
    }
    let reply: proto::MatchCapabilitiesReply = state
        .ask(
            "retrieval",
            subjects::CAPABILITIES_MATCH,
            &proto::MatchCapabilitiesRequest {
                prompt: prompt.to_owned(),
                project: project.to_owned(),
                strategy: strategy.to_owned(),
                ..Default::default()
            },
        )
        .await?;
    if !reply.error.is_empty() {
        return Err(ApiError::unavailable(format!(
            "retrieval could not match capabilities: {}",
            reply.error
        )));
    }
    let matches: Vec<Value> = reply
        .matches
        .iter()
        .filter_map(|m| {
            let mut entry = capability_json(m.capability.as_ref()?, &m.scope);
            entry["score"] = json!(m.score);
            Some(entry)
        })
        .collect();
    Ok(json!({"matches": matches, "ordinary": reply.ordinary}))
}

async fn matches(state: AppState, Query(query): Query<MatchQuery>) -> ApiResult<Json<Value>> {
    let prompt = crate::rest::text_param("prompt", &query.prompt, 4000)?;
    let project = crate::rest::text_param("project", &query.project, 4096)?;
    let strategy = crate::rest::text_param("strategy", &query.strategy, 20)?;
    Ok(Json(run_match(&state, &prompt, &project, &strategy).await?))
}
