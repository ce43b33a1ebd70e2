//! HTTP ingest: events sent as JSON by clients that cannot speak NATS, checked, scrubbed of
//! secrets and published to the same JetStream stream the hook publishes to, where ingest takes
//! them like any hook event.

use crate::State;
use crate::error::{ApiError, ApiResult};
use proto::event::Payload;
use proto::{Event, Message as _};
use serde::Deserialize;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::Instrument as _;

/// The most events one request may carry.
pub const MAX_EVENTS_PER_REQUEST: usize = 100;
/// The largest event published (NATS's default message limit is 1 MiB).
const MAX_EVENT_BYTES: usize = 900 * 1024;
/// How long a publish may wait for JetStream's ack.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// The kinds an HTTP client may send (the hook's vocabulary, plus `memory` and `workflow`).
pub const KINDS: [&str; 13] = [
    "session_start",
    "prompt",
    "pre_tool",
    "post_tool",
    "tool_failure",
    "pre_compact",
    "post_compact",
    "stop",
    "session_end",
    "notification",
    "memory",
    "subagent_stop",
    "workflow",
];

/// One event as JSON. Only `session_id` and `kind` are required; what else matters depends on
/// the kind (see the OpenAPI document).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventIn {
    pub id: Option<String>,
    pub agent: Option<String>,
    pub agent_version: Option<String>,
    pub session_id: String,
    pub project: Option<String>,
    pub cwd: Option<String>,
    pub user: Option<String>,
    pub host: Option<String>,
    pub model: Option<String>,
    pub occurred_at_ms: Option<i64>,
    pub kind: String,
    pub host_event: Option<String>,
    pub text: Option<String>,
    pub title: Option<String>,
    pub tool_name: Option<String>,
    pub tool_use_id: Option<String>,
    pub input: Option<Value>,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub source: Option<String>,
    pub reason: Option<String>,
    pub trigger: Option<String>,
    pub concepts: Option<Vec<String>>,
    pub files: Option<Vec<String>>,
    /// A workflow's steps, in order.
    pub steps: Option<Vec<String>>,
    /// A workflow's outcome: `success` or `failure`.
    pub outcome: Option<String>,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid_event", message)
}

fn short(field: &str, value: &Option<String>, max: usize) -> ApiResult<String> {
    let value = value.clone().unwrap_or_default();
    if value.chars().count() > max {
        return Err(invalid(format!("{field} is longer than {max} characters")));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(format!("{field} contains control characters")));
    }
    Ok(value)
}

/// Check one event and build the envelope the hook would have built.
pub fn build(input: EventIn, now_ms: i64) -> ApiResult<Event> {
    let session_id = short("session_id", &Some(input.session_id.clone()), 256)?;
    if session_id.trim().is_empty() {
        return Err(invalid("session_id must not be empty"));
    }
    let id = match &input.id {
        Some(id) if proto::is_valid_event_id(id) => id.clone(),
        Some(_) => return Err(invalid("id must be 32 lowercase hex characters")),
        None => proto::new_event_id(),
    };
    let agent = match input.agent.as_deref() {
        None | Some("" | "unknown") => proto::Agent::Unspecified,
        Some(slug) => proto::Agent::from_slug(slug).ok_or_else(|| {
            invalid(format!(
                "unknown agent {slug:?}: claude-code, kimi, codex, cursor, kiro or gemini"
            ))
        })?,
    };
    let occurred_at_ms = match input.occurred_at_ms {
        None => now_ms,
        Some(ms) if ms > 0 && ms <= now_ms + 86_400_000 => ms,
        Some(_) => {
            return Err(invalid(
                "occurred_at_ms must be Unix milliseconds, not in the future",
            ));
        }
    };
    let text = input.text.clone().unwrap_or_default();
    let title = short("title", &input.title, 500)?;
    let tool_name = short("tool_name", &input.tool_name, 200)?;
    let json_text = |value: &Option<Value>| match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => Value::String(s.clone()).to_string(),
        Some(other) => other.to_string(),
    };
    let need_text = |what: &str| {
        if text.trim().is_empty() {
            Err(invalid(format!("a {what} event needs text")))
        } else {
            Ok(text.clone())
        }
    };
    let tool = |kind: &str| -> ApiResult<proto::ToolCall> {
        if tool_name.trim().is_empty() {
            return Err(invalid(format!("a {kind} event needs tool_name")));
        }
        Ok(proto::ToolCall {
            tool_name: tool_name.clone(),
            tool_use_id: input.tool_use_id.clone().unwrap_or_default(),
            input_json: json_text(&input.input),
            response_json: json_text(&input.output),
            error: input.error.clone().unwrap_or_default(),
            ..Default::default()
        })
    };
    let list = |values: &Option<Vec<String>>, what: &str| -> ApiResult<Vec<String>> {
        let values = values.clone().unwrap_or_default();
        if values.len() > 50 {
            return Err(invalid(format!("at most 50 {what}")));
        }
        for value in &values {
            short(what, &Some(value.clone()), 500)?;
        }
        Ok(values
            .into_iter()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect())
    };
    let payload = match input.kind.as_str() {
        "session_start" => Payload::SessionStart(proto::SessionStart {
            source: input.source.clone().unwrap_or_default(),
        }),
        "prompt" => Payload::Prompt(proto::Prompt {
            text: need_text("prompt")?,
        }),
        "pre_tool" => Payload::PreTool(tool("pre_tool")?),
        "post_tool" => Payload::PostTool(tool("post_tool")?),
        "tool_failure" => Payload::ToolFailure(tool("tool_failure")?),
        "pre_compact" | "post_compact" => {
            let compact = proto::Compact {
                trigger: input.trigger.clone().unwrap_or_default(),
                custom_instructions: if input.kind == "pre_compact" {
                    text.clone()
                } else {
                    String::new()
                },
                summary: if input.kind == "post_compact" {
                    text.clone()
                } else {
                    String::new()
                },
                ..Default::default()
            };
            if input.kind == "pre_compact" {
                Payload::PreCompact(compact)
            } else {
                Payload::PostCompact(compact)
            }
        }
        "stop" => Payload::Stop(proto::Stop {
            last_message: text.clone(),
            error: input.error.clone().unwrap_or_default(),
            ..Default::default()
        }),
        "subagent_stop" => Payload::SubagentStop(proto::Subagent {
            agent_type: title.clone(),
            last_message: text.clone(),
            ..Default::default()
        }),
        "session_end" => Payload::SessionEnd(proto::SessionEnd {
            reason: input.reason.clone().unwrap_or_default(),
        }),
        "notification" => Payload::Notification(proto::Notification {
            message: need_text("notification")?,
            title: title.clone(),
            ..Default::default()
        }),
        "memory" => Payload::Memory(proto::Memory {
            text: need_text("memory")?,
            title: title.clone(),
            concepts: list(&input.concepts, "concepts")?,
            files: list(&input.files, "files")?,
        }),
        "workflow" => {
            let steps = list(&input.steps, "steps")?;
            if steps.is_empty() {
                return Err(invalid("a workflow event needs steps"));
            }
            let outcome = input.outcome.clone().unwrap_or_default();
            if !matches!(outcome.as_str(), "success" | "failure") {
                return Err(invalid("a workflow's outcome is success or failure"));
            }
            Payload::Workflow(proto::Workflow {
                situation: need_text("workflow")?,
                steps,
                outcome,
                reason: short("reason", &input.reason, 2000)?,
                files: list(&input.files, "files")?,
            })
        }
        other => {
            return Err(invalid(format!(
                "unknown kind {other:?}: one of {}",
                KINDS.join(", ")
            )));
        }
    };
    let event = Event {
        schema_version: proto::SCHEMA_VERSION,
        id,
        occurred_at_ms,
        captured_at_ms: now_ms,
        agent: agent as i32,
        agent_version: short("agent_version", &input.agent_version, 100)?,
        host: short("host", &input.host, 200)?,
        user: short("user", &input.user, 200)?,
        session_id,
        project: short("project", &input.project, 4096)?,
        cwd: short("cwd", &input.cwd, 4096)?,
        host_event: short("host_event", &input.host_event, 100)?,
        model: short("model", &input.model, 200)?,
        payload: Some(payload),
        ..Default::default()
    };
    Ok(event)
}

/// Shorten what a host could make huge, the way the hook does, so an event fits one message.
fn fit(event: &mut Event, sanitizer: &sanitize::Sanitizer) {
    let each = |field: &mut String| {
        if let (text, Some(_)) = sanitizer.truncate(field) {
            *field = text;
        }
    };
    match &mut event.payload {
        Some(Payload::Prompt(p)) => each(&mut p.text),
        Some(Payload::PreTool(t) | Payload::PostTool(t) | Payload::ToolFailure(t)) => {
            each(&mut t.input_json);
            each(&mut t.response_json);
            each(&mut t.error);
        }
        Some(Payload::PreCompact(c) | Payload::PostCompact(c)) => {
            each(&mut c.summary);
            each(&mut c.custom_instructions);
        }
        Some(Payload::Stop(s)) => each(&mut s.last_message),
        Some(Payload::SubagentStop(s)) => each(&mut s.last_message),
        Some(Payload::Notification(n)) => each(&mut n.message),
        Some(Payload::Memory(m)) => each(&mut m.text),
        Some(Payload::Workflow(w)) => each(&mut w.situation),
        _ => {}
    }
}

/// Parse, check, scrub and publish a request body: one event object or an array of them.
/// Nothing is published unless every event is valid.
pub async fn accept(state: &State, mut body: Value) -> ApiResult<Vec<Event>> {
    // Secrets are scrubbed before anything is checked or published: JetStream keeps events on
    // disk, and nothing unscrubbed may reach a disk.
    state.sanitizer.clean_json(&mut body);
    let items = match body {
        Value::Array(items) => items,
        object @ Value::Object(_) => vec![object],
        _ => {
            return Err(invalid(
                "the body must be an event object or an array of them",
            ));
        }
    };
    if items.is_empty() || items.len() > MAX_EVENTS_PER_REQUEST {
        return Err(invalid(format!(
            "send between 1 and {MAX_EVENTS_PER_REQUEST} events at once"
        )));
    }
    let now = common::time::now_ms();
    let mut events = Vec::with_capacity(items.len());
    let many = items.len() > 1;
    for (index, item) in items.into_iter().enumerate() {
        let at = |message: String| {
            if many {
                invalid(format!("event {index}: {message}"))
            } else {
                invalid(message)
            }
        };
        let parsed: EventIn = serde_json::from_value(item).map_err(|e| at(e.to_string()))?;
        let mut event = build(parsed, now).map_err(|e| at(e.message))?;
        fit(&mut event, &state.sanitizer);
        if event.encoded_len() > MAX_EVENT_BYTES {
            return Err(at(format!(
                "the event is larger than {MAX_EVENT_BYTES} bytes after truncation"
            )));
        }
        events.push(event);
    }
    for event in &events {
        publish(state, event).await?;
    }
    Ok(events)
}

/// Publish one event with its id as `Nats-Msg-Id` (so a retried request is stored once) and wait
/// for JetStream's ack.
pub async fn publish(state: &State, event: &Event) -> ApiResult<()> {
    let jetstream = async_nats::jetstream::new(state.nats.clone());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
    let subject = event.subject();
    let span = tracing::info_span!("api.publish", event_id = %event.id, session_id = %event.session_id, %subject);
    span.in_scope(|| common::nats::inject_trace(&mut headers));
    let send = async {
        jetstream
            .publish_with_headers(subject, headers, event.encode_to_vec().into())
            .await
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())
    }
    .instrument(span);
    match tokio::time::timeout(ACK_TIMEOUT, send).await {
        Ok(Ok(_)) => {
            state
                .metrics
                .events_published
                .fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "publishing an event failed");
            Err(ApiError::unavailable(
                "the event stream did not take the event; retry with the same id",
            ))
        }
        Err(_) => Err(ApiError::unavailable(
            "the event stream did not acknowledge in time; retry with the same id",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(kind: &str) -> EventIn {
        EventIn {
            session_id: "s1".into(),
            kind: kind.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_memory_becomes_a_memory_payload() {
        let event = build(
            EventIn {
                text: Some("we deploy with blue-green".into()),
                concepts: Some(vec!["deploy".into(), " ".into()]),
                agent: Some("claude-code".into()),
                ..base("memory")
            },
            1_000,
        )
        .unwrap();
        assert!(proto::is_valid_event_id(&event.id));
        assert_eq!(event.occurred_at_ms, 1_000);
        assert_eq!(event.subject(), "mneme.events.claude-code.memory");
        let Some(Payload::Memory(memory)) = event.payload else {
            panic!("not a memory");
        };
        assert_eq!(memory.concepts, ["deploy"]);
    }

    #[test]
    fn a_workflow_needs_steps_and_an_outcome() {
        let workflow = |steps: Vec<&str>, outcome: &str| EventIn {
            text: Some("release a new version".into()),
            steps: Some(steps.into_iter().map(str::to_owned).collect()),
            outcome: Some(outcome.into()),
            ..base("workflow")
        };
        let event = build(workflow(vec!["make release"], "failure"), 1_000).unwrap();
        assert_eq!(event.subject(), "mneme.events.unknown.workflow");
        let Some(Payload::Workflow(run)) = event.payload else {
            panic!("not a workflow");
        };
        assert_eq!((run.steps.len(), run.outcome.as_str()), (1, "failure"));
        let message = |e: EventIn| build(e, 1_000).unwrap_err().message;
        assert!(message(workflow(vec![], "success")).contains("needs steps"));
        assert!(message(workflow(vec!["make"], "maybe")).contains("success or failure"));
    }

    #[test]
    fn bad_events_say_what_is_wrong() {
        let message = |e: EventIn| build(e, 1_000).unwrap_err().message;
        assert!(message(base("teleport")).contains("unknown kind"));
        assert!(message(base("prompt")).contains("needs text"));
        assert!(message(base("post_tool")).contains("tool_name"));
        assert!(
            message(EventIn {
                session_id: " ".into(),
                ..base("stop")
            })
            .contains("session_id")
        );
        assert!(
            message(EventIn {
                id: Some("xyz".into()),
                ..base("stop")
            })
            .contains("hex")
        );
        assert!(
            message(EventIn {
                agent: Some("vim".into()),
                ..base("stop")
            })
            .contains("agent")
        );
        assert!(
            message(EventIn {
                occurred_at_ms: Some(10_000_000_000),
                ..base("stop")
            })
            .contains("future")
        );
    }
}
