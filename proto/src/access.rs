//! Who may do what on NATS: one identity per part of mneme, each with the subjects it may
//! publish to and subscribe to, and nothing else.
//!
//! A hook runs on every developer's machine and holds its key in a file any of their tools can
//! read, so it gets the least: publish events, ask for context and search, read its own
//! replies. Each service may take what it consumes, serve what it answers and emit what it
//! emits. Deleting sessions, changing retention or collections and managing streams belong to
//! the api and to the machine owner's command line (`admin`). A server renders this table into
//! its configuration (`common::access`), so a stolen hook key cannot delete memory, read other
//! people's events or replies, answer retrieval with planted text, or touch `$JS.API`.

use crate::subjects as s;

/// One NATS identity of mneme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Hook,
    Ingest,
    Retrieval,
    Compressor,
    Pattern,
    Api,
    /// The machine owner's command line (`mneme up`, `status`, `import`, …) and tests: every
    /// subject, as the owner of the server.
    Admin,
}

impl Role {
    /// Every role, in the order configurations list them.
    pub const ALL: [Role; 7] = [
        Role::Hook,
        Role::Ingest,
        Role::Retrieval,
        Role::Compressor,
        Role::Pattern,
        Role::Api,
        Role::Admin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Hook => "hook",
            Role::Ingest => "ingest",
            Role::Retrieval => "retrieval",
            Role::Compressor => "compressor",
            Role::Pattern => "pattern",
            Role::Api => "api",
            Role::Admin => "admin",
        }
    }

    /// The role of a client connecting as `mneme-<client>`: a service as itself, the api's MCP
    /// over stdio as the api, and every other client (the command line's `up`, `status`,
    /// `import`, tests) as the machine owner.
    pub fn of_client(client: &str) -> Role {
        match client {
            "hook" => Role::Hook,
            "ingest" => Role::Ingest,
            "retrieval" => Role::Retrieval,
            "compressor" => Role::Compressor,
            "pattern" => Role::Pattern,
            "api" | "mcp" => Role::Api,
            _ => Role::Admin,
        }
    }

    /// The file holding this role's NKey seed in a keys directory.
    pub fn key_file(self) -> String {
        format!("{}.nk", self.name())
    }

    /// The prefix of this role's reply inboxes. Each role reads only its own, so no identity
    /// can read the replies another one asked for (a search's results, a context).
    pub fn inbox_prefix(self) -> String {
        format!("_INBOX.{}", self.name())
    }

    /// What this role may publish and subscribe to.
    pub fn permissions(self) -> Permissions {
        let mut p = Permissions {
            publish: Vec::new(),
            subscribe: vec![format!("{}.>", self.inbox_prefix())],
            allow_responses: false,
        };
        let service = |p: &mut Permissions, name: &str| {
            p.subscribe.push(s::health_subject(name));
            p.publish.push(s::dlq_subject(name));
            p.allow_responses = true;
            p.publish.extend(ensure_streams());
        };
        match self {
            Role::Hook => {
                p.publish.extend([
                    s::EVENTS_ALL.to_owned(),
                    s::RETRIEVAL_CONTEXT.to_owned(),
                    s::RETRIEVAL_SEARCH.to_owned(),
                ]);
            }
            Role::Ingest => {
                service(&mut p, "ingest");
                p.publish
                    .extend(consume(s::EVENTS_STREAM, s::INGEST_CONSUMER));
                p.publish
                    .extend(consume(s::TEAM_IN_STREAM, s::INGEST_TEAM_CONSUMER));
                p.publish.extend([
                    s::INGEST_ALL.to_owned(),
                    // What this machine shares with its team, into its own outgoing stream,
                    // which ingest makes when the machine is in a team.
                    s::TEAM_ALL.to_owned(),
                    format!("$JS.API.STREAM.INFO.{}", s::TEAM_OUT_STREAM),
                    format!("$JS.API.STREAM.CREATE.{}", s::TEAM_OUT_STREAM),
                    format!("$JS.API.STREAM.INFO.{}", s::TEAM_IN_STREAM),
                    s::RETRIEVAL_FORGET.to_owned(),
                    // Deleting a session erases its raw events from the events stream.
                    format!("$JS.API.STREAM.MSG.DELETE.{}", s::EVENTS_STREAM),
                    format!("$JS.API.STREAM.MSG.DELETE.{}", s::DLQ_STREAM),
                    format!("$JS.API.STREAM.MSG.GET.{}", s::DLQ_STREAM),
                ]);
                p.subscribe.extend(
                    [
                        s::SESSIONS_ARCHIVE,
                        s::SESSIONS_DELETE,
                        s::SESSIONS_IMPORT,
                        s::RETENTION_GET,
                        s::RETENTION_SET,
                        s::RETENTION_APPLY,
                    ]
                    .map(str::to_owned),
                );
            }
            Role::Retrieval => {
                service(&mut p, "retrieval");
                for stream in [s::INGEST_STREAM, s::COMPRESSOR_STREAM, s::PATTERN_STREAM] {
                    p.publish.extend(consume(stream, s::RETRIEVAL_CONSUMER));
                }
                p.subscribe.push("mneme.retrieval.>".to_owned());
                // A search asked to be reworded asks the compressor's LLM.
                p.publish.push(s::COMPRESSOR_REWRITE.to_owned());
            }
            Role::Compressor => {
                service(&mut p, "compressor");
                p.publish
                    .extend(consume(s::INGEST_STREAM, s::COMPRESSOR_CONSUMER));
                p.publish.push(s::COMPRESSOR_WRITTEN_ALL.to_owned());
                p.subscribe.extend(
                    [
                        s::COMPRESSOR_COMPRESS,
                        s::COMPRESSOR_CHECKPOINT,
                        s::COMPRESSOR_REWRITE,
                    ]
                    .map(str::to_owned),
                );
            }
            Role::Pattern => {
                service(&mut p, "pattern");
                p.publish
                    .extend(consume(s::INGEST_STREAM, s::PATTERN_CONSUMER));
                p.publish.push(s::PATTERN_UPDATED.to_owned());
            }
            Role::Api => {
                // The front door asks every service, writes events like a hook, and follows
                // the notices for its live stream; it reads the streams' state for progress but
                // manages none of them.
                p.publish.extend(
                    [
                        s::EVENTS_ALL,
                        "mneme.retrieval.>",
                        "mneme.sessions.>",
                        "mneme.retention.>",
                        s::COMPRESSOR_COMPRESS,
                        s::COMPRESSOR_CHECKPOINT,
                        "mneme.health.>",
                        "$JS.API.INFO",
                        "$JS.API.STREAM.INFO.*",
                        "$JS.API.CONSUMER.INFO.*.*",
                    ]
                    .map(str::to_owned),
                );
                // It answers its own health probe like a service.
                p.subscribe.push(s::health_subject("api"));
                p.allow_responses = true;
                p.subscribe.extend(
                    [
                        s::OBSERVATION_STORED,
                        s::COMPRESSOR_WRITTEN_ALL,
                        s::PATTERN_UPDATED,
                    ]
                    .map(str::to_owned),
                );
            }
            Role::Admin => {
                p.publish = vec![">".to_owned()];
                p.subscribe = vec![">".to_owned()];
                p.allow_responses = true;
            }
        }
        p
    }
}

/// Subjects one identity may publish to and subscribe to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
    /// Whether it may publish a reply to a request it received (a service answering).
    pub allow_responses: bool,
}

/// What a service needs to create mneme's streams when they do not exist yet (every service
/// does at start, so they may start in any order): look each one up, and create it. Not
/// update, purge or delete.
fn ensure_streams() -> Vec<String> {
    [
        s::EVENTS_STREAM,
        s::INGEST_STREAM,
        s::COMPRESSOR_STREAM,
        s::PATTERN_STREAM,
        s::DLQ_STREAM,
    ]
    .iter()
    .flat_map(|stream| {
        [
            format!("$JS.API.STREAM.INFO.{stream}"),
            format!("$JS.API.STREAM.CREATE.{stream}"),
        ]
    })
    .collect()
}

/// What reading one durable pull consumer takes: creating or updating it (with or without a
/// filter subject in the API subject), its state, its next messages, and acking them.
fn consume(stream: &str, consumer: &str) -> Vec<String> {
    vec![
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.{consumer}.>"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
        format!("$JS.ACK.{stream}.{consumer}.>"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_may_only_publish_events_and_ask_for_memory() {
        let hook = Role::Hook.permissions();
        assert!(!hook.allow_responses);
        assert_eq!(hook.subscribe, vec!["_INBOX.hook.>".to_owned()]);
        assert!(
            hook.publish
                .iter()
                .all(|subject| !subject.starts_with("$JS"))
        );
        assert!(
            !hook
                .publish
                .iter()
                .any(|subject| subject.contains("delete"))
        );
    }

    #[test]
    fn every_client_name_has_a_role_and_each_role_its_own_inbox() {
        assert_eq!(Role::of_client("mcp"), Role::Api);
        assert_eq!(Role::of_client("status"), Role::Admin);
        let prefixes: std::collections::HashSet<_> =
            Role::ALL.iter().map(|r| r.inbox_prefix()).collect();
        assert_eq!(prefixes.len(), Role::ALL.len());
    }
}
