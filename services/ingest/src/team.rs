//! Team memory, ingest's part. Ingest is where an event becomes memory, so it is where the
//! team's rules are kept: after it stored an event of this machine's own in a project this
//! machine shares (`team.yaml`, see `common::team`), it puts the event, scrubbed again with
//! ingest's own settings, into `MNEME_TEAM_OUT`, which the hub mirrors; what the other members
//! share arrives in `MNEME_TEAM_IN`, and ingest stores it like a local event, under this
//! machine's checkout of the project and with the member it came from. Deleting one of this
//! machine's own sessions of a shared project is shared the same way, and a deletion the team
//! shares deletes here. Nothing of a project that is not shared, and nothing that came from
//! the team, ever goes out.

use crate::record::Observation;
use anyhow::Context as _;
use common::team::Team;
use proto::{Event, Message as _, subjects};
use sqlx::SqlitePool;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the team file is looked at again (its modification time), so `mneme team share`
/// takes effect without restarting ingest.
const RECHECK: Duration = Duration::from_secs(1);

/// How long what a repository's `.mneme/team.yaml` declares is trusted before it is read
/// again: a file read per event would cost more than the event.
const DECLARATION_TTL: Duration = Duration::from_secs(30);

/// This machine's team, as its file says now, and what the repositories declare.
pub struct Sharing {
    home: PathBuf,
    cached: Mutex<Cached>,
    declared: Mutex<std::collections::HashMap<String, (Instant, Option<String>)>>,
}

struct Cached {
    checked: Option<Instant>,
    stamp: Option<SystemTime>,
    team: Option<Arc<Team>>,
}

impl Sharing {
    pub fn new(home: PathBuf) -> Sharing {
        Sharing {
            home,
            cached: Mutex::new(Cached {
                checked: None,
                stamp: None,
                team: None,
            }),
            declared: Mutex::new(Default::default()),
        }
    }

    /// The team name under which `team` shares the project at `project`, if it does (see
    /// `Team::shared_name`), reading the repository's declaration at most once a
    /// [`DECLARATION_TTL`].
    pub fn shared_name(&self, team: &Team, project: &str) -> Option<String> {
        team.shared_name(project, |project| {
            let mut declared = self.declared.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, name)) = declared.get(project)
                && at.elapsed() < DECLARATION_TTL
            {
                return name.clone();
            }
            let name = common::team::declared_name(std::path::Path::new(project));
            declared.insert(project.to_owned(), (Instant::now(), name.clone()));
            name
        })
    }

    /// The team file as it is now: read again when it changed, at most once a [`RECHECK`]. A
    /// file that cannot be read keeps what was read before (and says so in the log), so a
    /// half-written edit never shares a project nobody chose.
    pub fn current(&self) -> Option<Arc<Team>> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if cached.checked.is_some_and(|at| at.elapsed() < RECHECK) {
            return cached.team.clone();
        }
        cached.checked = Some(Instant::now());
        let stamp = std::fs::metadata(self.home.join(common::team::FILE))
            .and_then(|m| m.modified())
            .ok();
        if stamp.is_some() && stamp == cached.stamp {
            return cached.team.clone();
        }
        match Team::load(&self.home) {
            Ok(team) => {
                cached.stamp = stamp;
                cached.team = team.map(Arc::new);
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "cannot read the team file; keeping what was read before");
            }
        }
        cached.team.clone()
    }
}

/// The message that shares a stored event of this machine's own, when the team shares its
/// project: the event scrubbed again with ingest's sanitiser (which may be stricter than the
/// hook's), and nothing at all when it touched a file the exclude globs keep private.
pub fn share(
    sharing: &Sharing,
    team: &Team,
    event: &Event,
    observation: &Observation,
    sanitizer: &sanitize::Sanitizer,
    span: &tracing::Span,
) -> Option<common::streams::Announcement> {
    let project = sharing.shared_name(team, &event.project)?;
    if observation.meta.get("excluded").is_some() {
        return None;
    }
    let mut shared = event.clone();
    shared.for_each_text(|text| {
        // JSON fields (tool input and output, the host's extra fields) are scrubbed value by
        // value, so they stay JSON the other members' ingest can read.
        let trimmed = text.trim_start();
        if trimmed.starts_with(['{', '['])
            && let Ok(mut value) = serde_json::from_str::<serde_json::Value>(text)
        {
            sanitizer.clean_json(&mut value);
            *text = value.to_string();
        } else if !text.is_empty() {
            *text = sanitizer.clean_text(text).0;
        }
    });
    Some(common::streams::Announcement {
        subject: subjects::team_event_subject(&project, &team.member),
        id: format!("team-{}", event.id),
        span: Some(span.clone()),
        payload: shared.encode_to_vec().into(),
    })
}

/// What a message from the team is: its subject is `mneme.team.<project>.<member>.<what>`.
pub struct FromTeam<'a> {
    pub project: &'a str,
    pub member: &'a str,
    pub what: &'a str,
}

/// Read a team subject.
pub fn from_team(subject: &str) -> Option<FromTeam<'_>> {
    let (project, member, what) = subjects::parse_team_subject(subject)?;
    Some(FromTeam {
        project,
        member,
        what,
    })
}

/// Make an event the team shared this machine's: it is stored under this machine's checkout
/// of the project (the same team project lives at a different path on every machine).
/// `Err` says why it cannot be stored here.
pub fn localise(team: &Team, event: &mut Event, from: &FromTeam<'_>) -> Result<(), String> {
    if from.member == team.member {
        return Err(format!(
            "an event shared by {:?}, this machine's own member name: two machines of the team use the same name",
            from.member
        ));
    }
    let Some(path) = team.local_path(from.project) else {
        return Err(format!(
            "team project {:?} is not shared on this machine",
            from.project
        ));
    };
    event.project = path.to_owned();
    Ok(())
}

/// Share the deletion of this machine's own sessions among `ids` whose projects the team
/// shares, before they are deleted here (so a failure leaves everything to be tried again).
pub async fn share_deletion(
    client: &async_nats::Client,
    pool: &SqlitePool,
    sharing: &Sharing,
    ids: &[String],
) -> anyhow::Result<()> {
    let Some(team) = sharing.current() else {
        return Ok(());
    };
    let mut by_project: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for id in ids {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT project FROM sessions WHERE id = ? AND team_member = ''")
                .bind(id)
                .fetch_optional(pool)
                .await
                .context("reading the sessions to delete")?;
        if let Some((project,)) = row
            && let Some(name) = sharing.shared_name(&team, &project)
        {
            by_project.entry(name).or_default().push(id.clone());
        }
    }
    let jetstream = async_nats::jetstream::new(client.clone());
    for (project, session_ids) in by_project {
        let notice = proto::SessionsDeleted {
            session_ids,
            deleted_at_ms: common::time::now_ms(),
        };
        let published = async {
            jetstream
                .publish(
                    subjects::team_deleted_subject(&project, &team.member),
                    notice.encode_to_vec().into(),
                )
                .await?
                .await
                .map_err(anyhow::Error::from)
        };
        tokio::time::timeout(Duration::from_secs(5), published)
            .await
            .context("sharing the deletion: jetstream did not acknowledge in time")?
            .context("sharing the deletion with the team")?;
        tracing::info!(
            %project,
            sessions = notice.session_ids.len(),
            "deletion shared with the team"
        );
    }
    Ok(())
}

/// Make the stream of what this machine shares, once it is in a team.
pub async fn ensure_out_stream(jetstream: &async_nats::jetstream::Context) -> anyhow::Result<()> {
    jetstream
        .get_or_create_stream(common::streams::team_out_config())
        .await
        .with_context(|| format!("creating stream {}", subjects::TEAM_OUT_STREAM))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::team::Shared;

    fn team() -> Team {
        Team {
            hub: vec!["nats-leaf://hub:7422".to_owned()],
            member: "bob".to_owned(),
            machine: "0123456789abcdef".to_owned(),
            credentials: None,
            shared: vec![Shared {
                name: "payments".to_owned(),
                path: "/home/bob/payments".to_owned(),
            }],
            declined: Vec::new(),
        }
    }

    #[test]
    fn a_shared_event_lands_in_this_machines_checkout() {
        let from = from_team("mneme.team.payments.alice.event").unwrap();
        assert_eq!(
            (from.project, from.member, from.what),
            ("payments", "alice", "event")
        );
        let mut event = Event {
            project: "/home/alice/src/payments".to_owned(),
            ..Default::default()
        };
        localise(&team(), &mut event, &from).unwrap();
        assert_eq!(event.project, "/home/bob/payments");

        let other = from_team("mneme.team.billing.alice.event").unwrap();
        assert!(localise(&team(), &mut event, &other).is_err());
        let mine = from_team("mneme.team.payments.bob.event").unwrap();
        let error = localise(&team(), &mut event, &mine).unwrap_err();
        assert!(error.contains("same name"), "{error}");
        assert!(from_team("mneme.events.claude_code.prompt").is_none());
        assert!(from_team("mneme.team.a.b.c.d").is_none());
    }

    #[test]
    fn only_shared_projects_leave_and_what_leaves_is_scrubbed_again() {
        let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
        let secret = "AKIAIOSFODNN7EXAMPLE";
        let mut event = Event {
            id: proto::new_event_id(),
            project: "/home/bob/payments".to_owned(),
            payload: Some(proto::event::Payload::Prompt(proto::Prompt {
                text: format!("deploy with key {secret}"),
            })),
            ..Default::default()
        };
        let observation = crate::record::build_observation(&event, &sanitizer);
        let span = tracing::Span::none();
        let sharing = Sharing::new(std::env::temp_dir());
        let shared = share(&sharing, &team(), &event, &observation, &sanitizer, &span).unwrap();
        assert_eq!(shared.subject, "mneme.team.payments.bob.event");
        let sent = Event::decode(shared.payload).unwrap();
        let Some(proto::event::Payload::Prompt(prompt)) = sent.payload else {
            panic!("not a prompt")
        };
        assert!(!prompt.text.contains(secret), "{}", prompt.text);

        // A tool call's JSON stays JSON, without the secret.
        let call = Event {
            id: proto::new_event_id(),
            project: "/home/bob/payments".to_owned(),
            payload: Some(proto::event::Payload::PostTool(proto::ToolCall {
                tool_name: "Bash".to_owned(),
                input_json: format!(r#"{{"command":"aws s3 ls --key {secret}"}}"#),
                response_json: r#"{"stdout":"ok"}"#.to_owned(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let call_observation = crate::record::build_observation(&call, &sanitizer);
        let shared = share(
            &sharing,
            &team(),
            &call,
            &call_observation,
            &sanitizer,
            &span,
        )
        .unwrap();
        let Some(proto::event::Payload::PostTool(sent)) =
            Event::decode(shared.payload).unwrap().payload
        else {
            panic!("not a tool call")
        };
        let input: serde_json::Value = serde_json::from_str(&sent.input_json).unwrap();
        assert!(!sent.input_json.contains(secret), "{}", sent.input_json);
        assert!(input["command"].as_str().unwrap().starts_with("aws s3 ls"));

        event.project = "/home/bob/private".to_owned();
        assert!(share(&sharing, &team(), &event, &observation, &sanitizer, &span).is_none());

        // A repository that declares its team name is shared without being listed.
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".mneme")).unwrap();
        std::fs::write(repo.path().join(".mneme/team.yaml"), "project: billing\n").unwrap();
        event.project = repo.path().display().to_string();
        let shared = share(&sharing, &team(), &event, &observation, &sanitizer, &span).unwrap();
        assert_eq!(shared.subject, "mneme.team.billing.bob.event");
    }
}
