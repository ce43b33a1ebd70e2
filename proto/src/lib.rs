//! The wire contract of mneme: every protobuf message that crosses NATS, and every subject,
//! stream and durable-consumer name (see [`subjects`]).
//!
//! Messages are generated at build time from `proto/*.proto` by prost, fed by protox so that no
//! system `protoc` is needed. This crate does no I/O beyond reading environment variables for [`defaults`].
//!
//! Architecture invariant: no other crate defines a type that is sent over NATS.

#![allow(missing_docs)]

pub mod access;
pub mod defaults;
pub mod subjects;

/// Generated protobuf messages, package `mneme.v1`.
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/mneme.v1.rs"));
}

pub use prost::Message;
pub use v1::*;

/// Version of the [`Event`] envelope this build writes and understands.
pub const SCHEMA_VERSION: u32 = 1;

/// Make a new event id: 16 hex digits of Unix nanoseconds, then 16 random hex digits.
///
/// Ids sort by creation time across processes on one machine (to the nanosecond), which is what
/// the hook's spool relies on to replay in order, and collide with negligible probability.
pub fn new_event_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    let mut random = [0u8; 8];
    // A failing OS random source is not worth losing an event over; the time part still orders.
    let _ = getrandom::fill(&mut random);
    format!("{nanos:016x}{:016x}", u64::from_le_bytes(random))
}

/// Whether `id` has the shape [`new_event_id`] produces.
pub fn is_valid_event_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Agent {
    /// The short name used in subjects, the store and the CLI (`claude-code`, `kimi`, …).
    pub fn slug(self) -> &'static str {
        match self {
            Agent::Unspecified => "unknown",
            Agent::ClaudeCode => "claude-code",
            Agent::Kimi => "kimi",
            Agent::Codex => "codex",
            Agent::Cursor => "cursor",
            Agent::Kiro => "kiro",
            Agent::Gemini => "gemini",
        }
    }

    /// Parse a slug as produced by [`Agent::slug`].
    pub fn from_slug(slug: &str) -> Option<Agent> {
        Some(match slug {
            "claude-code" | "claude" => Agent::ClaudeCode,
            "kimi" => Agent::Kimi,
            "codex" => Agent::Codex,
            "cursor" => Agent::Cursor,
            "kiro" => Agent::Kiro,
            "gemini" => Agent::Gemini,
            _ => return None,
        })
    }
}

impl event::Payload {
    /// The lifecycle kind, from the shared vocabulary every host adapter maps onto.
    pub fn kind(&self) -> &'static str {
        use event::Payload as P;
        match self {
            P::SessionStart(_) => "session_start",
            P::Prompt(_) => "prompt",
            P::PreTool(_) => "pre_tool",
            P::PostTool(_) => "post_tool",
            P::ToolFailure(_) => "tool_failure",
            P::SubagentStart(_) => "subagent_start",
            P::SubagentStop(_) => "subagent_stop",
            P::PreCompact(_) => "pre_compact",
            P::PostCompact(_) => "post_compact",
            P::Stop(_) => "stop",
            P::SessionEnd(_) => "session_end",
            P::Notification(_) => "notification",
            P::Unknown(_) => "other",
            P::Invalid(_) => "invalid",
            P::Memory(_) => "memory",
            P::Workflow(_) => "workflow",
        }
    }
}

impl Event {
    /// The lifecycle kind of this event, `none` when the payload is missing.
    pub fn kind(&self) -> &'static str {
        self.payload.as_ref().map_or("none", event::Payload::kind)
    }

    /// The subject this event is published on.
    pub fn subject(&self) -> String {
        subjects::event_subject(self.agent().slug(), self.kind())
    }

    /// Call `f` on every free text the event carries (what a person, a tool or a model wrote,
    /// and the host fields kept as JSON): what the hook shortens to fit one message, and what
    /// ingest scrubs again before a shared event leaves the machine.
    pub fn for_each_text(&mut self, mut f: impl FnMut(&mut String)) {
        use event::Payload as P;
        f(&mut self.extra_json);
        match &mut self.payload {
            Some(P::Prompt(p)) => f(&mut p.text),
            Some(P::PreTool(t) | P::PostTool(t) | P::ToolFailure(t)) => {
                f(&mut t.input_json);
                f(&mut t.response_json);
                f(&mut t.error);
            }
            Some(P::SubagentStart(s) | P::SubagentStop(s)) => f(&mut s.last_message),
            Some(P::PreCompact(c) | P::PostCompact(c)) => {
                f(&mut c.summary);
                f(&mut c.custom_instructions);
            }
            Some(P::Stop(s)) => f(&mut s.last_message),
            Some(P::Notification(n)) => f(&mut n.message),
            Some(P::Unknown(u)) => f(&mut u.raw_json),
            Some(P::Invalid(i)) => f(&mut i.excerpt),
            Some(P::Memory(m)) => {
                f(&mut m.text);
                f(&mut m.title);
            }
            Some(P::Workflow(w)) => {
                f(&mut w.situation);
                f(&mut w.reason);
                w.steps.iter_mut().for_each(&mut f);
            }
            Some(P::SessionStart(_) | P::SessionEnd(_)) | None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_valid_unique_and_time_ordered() {
        let ids: Vec<String> = (0..1000).map(|_| new_event_id()).collect();
        assert!(ids.iter().all(|id| is_valid_event_id(id)));
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "ids collided");
        // Time prefixes never go backwards within one thread.
        assert!(ids.windows(2).all(|w| w[0][..16] <= w[1][..16]));
    }

    #[test]
    fn envelope_round_trips_and_names_its_subject() {
        let event = Event {
            schema_version: SCHEMA_VERSION,
            id: new_event_id(),
            agent: Agent::ClaudeCode as i32,
            session_id: "s1".into(),
            payload: Some(event::Payload::PostTool(ToolCall {
                tool_name: "Bash".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let bytes = event.encode_to_vec();
        let back = Event::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, event);
        assert_eq!(back.subject(), "mneme.events.claude-code.post_tool");
    }

    #[test]
    fn agent_slugs_round_trip() {
        for agent in [
            Agent::ClaudeCode,
            Agent::Kimi,
            Agent::Codex,
            Agent::Cursor,
            Agent::Kiro,
            Agent::Gemini,
        ] {
            assert_eq!(Agent::from_slug(agent.slug()), Some(agent));
        }
        assert_eq!(Agent::from_slug("vim"), None);
    }
}
