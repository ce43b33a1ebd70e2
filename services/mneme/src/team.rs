//! `mneme team`: this machine in a team, with NATS doing the moving.
//!
//! `join` writes `team.yaml` (see `common::team`); from its next start `mneme up` runs its
//! `nats-server` as a leaf node of the hub, under a JetStream domain of this machine's own
//! (its member name). `share` and `unshare` choose the projects whose memory leaves the
//! machine; ingest reads the file as it changes. [`keep`], run by `mneme up`, keeps the two
//! ends of the replication in place whenever the hub can be reached: the hub's mirror of this
//! machine's outgoing stream, and this machine's incoming stream sourcing every other
//! member's mirror on the hub for the shared projects. JetStream does the rest, offline or not.

use anyhow::Context as _;
use async_nats::jetstream;
use common::CommonArgs;
use common::team::{Credentials, Shared, Team};
use proto::subjects;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum TeamCommand {
    /// Join a team: `mneme up` (running, or from its next start) connects this machine's
    /// nats-server to the hub at URL (a leaf node port, `nats-leaf://host:7422`; several comma-separated for a
    /// clustered hub). Nothing is shared until `mneme team share`.
    Join {
        #[command(flatten)]
        common: CommonArgs,
        /// The hub's leaf node URL(s), without credentials.
        #[arg(value_delimiter = ',', required = true)]
        url: Vec<String>,
        /// File holding an NKey user seed the hub lists.
        #[arg(long, value_name = "FILE", group = "credentials")]
        nkey: Option<PathBuf>,
        /// Credentials file (user JWT and seed) for a hub in operator mode.
        #[arg(long, value_name = "FILE", group = "credentials")]
        creds: Option<PathBuf>,
        /// File holding a token, or `user:password`, the hub's leaf node port accepts.
        #[arg(long, value_name = "FILE", group = "credentials")]
        token_file: Option<PathBuf>,
        /// This machine's name in the team (lowercase letters, digits, '-', '_'); by default
        /// made from the user and host names.
        #[arg(long)]
        name: Option<String>,
    },
    /// Leave the team: this machine keeps all its memory, shares nothing more and receives
    /// nothing more.
    Leave {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Share a project's memory from now on, under its team name (the same on every member's
    /// machine, whatever the checkout's path).
    Share {
        #[command(flatten)]
        common: CommonArgs,
        /// The project's directory (its git root is taken); the current directory by default.
        #[arg(default_value = ".")]
        project: PathBuf,
        /// The project's name in the team; by default what its `.mneme/team.yaml` declares,
        /// else the directory's name.
        #[arg(long = "as", value_name = "NAME")]
        name: Option<String>,
    },
    /// Stop sharing a project (what was shared stays with the others).
    Unshare {
        #[command(flatten)]
        common: CommonArgs,
        /// The project's directory, or its team name.
        #[arg(default_value = ".")]
        project: String,
    },
    /// The link to the hub, what waits to go out or come in per shared project, and the last
    /// event seen from each member.
    Status {
        #[command(flatten)]
        common: CommonArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: TeamCommand) -> anyhow::Result<()> {
    match command {
        TeamCommand::Join {
            common,
            url,
            nkey,
            creds,
            token_file,
            name,
        } => {
            let credentials = match (nkey, creds, token_file) {
                (Some(path), _, _) => Some(Credentials::Nkey(absolute(&path)?)),
                (_, Some(path), _) => Some(Credentials::Creds(absolute(&path)?)),
                (_, _, Some(path)) => Some(Credentials::TokenFile(absolute(&path)?)),
                _ => None,
            };
            join(&common, url, credentials, name).await
        }
        TeamCommand::Leave { common } => leave(&common).await,
        TeamCommand::Share {
            common,
            project,
            name,
        } => share(&common, &project, name),
        TeamCommand::Unshare { common, project } => unshare(&common, &project),
        TeamCommand::Status { common, json } => status(&common, json).await,
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
}

/// The default member name: `user-host`, made a valid name.
fn default_member() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_default();
    let raw = format!("{user}-{}", hosts::adapter::hostname());
    let mut name: String = raw
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    name = name.trim_matches('-').to_owned();
    name.truncate(48);
    name
}

async fn join(
    common: &CommonArgs,
    hub: Vec<String>,
    credentials: Option<Credentials>,
    name: Option<String>,
) -> anyhow::Result<()> {
    let home = common.home_dir();
    common.secure_home()?;
    let previous = Team::load(&home)?;
    let member = name
        .or_else(|| previous.as_ref().map(|t| t.member.clone()))
        .unwrap_or_else(default_member);
    let team = Team {
        hub,
        member,
        machine: previous
            .as_ref()
            .map(|t| t.machine.clone())
            .unwrap_or_else(|| proto::new_event_id()[16..].to_owned()),
        credentials,
        shared: previous
            .as_ref()
            .map(|t| t.shared.clone())
            .unwrap_or_default(),
        declined: previous.map(|t| t.declined).unwrap_or_default(),
    };
    // The credentials are read now, so a wrong file is said here and not at the next start.
    team.leaf_block()
        .context("the hub's credentials cannot be used")?;
    if let Some(Credentials::Nkey(path) | Credentials::Creds(path) | Credentials::TokenFile(path)) =
        &team.credentials
    {
        store::private_file(path).ok();
    }
    team.save(&home)?;
    println!(
        "joined the team at {} as {:?}; this machine shares nothing until `mneme team share`",
        team.hub.join(", "),
        team.member
    );
    println!("{}", restart_note(common).await);
    Ok(())
}

/// When a change of the leaf link takes effect: a running `mneme up` restarts its nats-server
/// with it within seconds, and one started later reads it at start.
async fn restart_note(common: &CommonArgs) -> String {
    if running(common).await {
        "the running `mneme up` restarts its nats-server with this setting within seconds (`mneme team status` shows the link)".to_owned()
    } else {
        "the next `mneme up` connects with this setting".to_owned()
    }
}

/// Whether `mneme up` (its ingest) answers on this machine.
async fn running(common: &CommonArgs) -> bool {
    common::nats::ask::<proto::HealthReply>(
        common,
        &subjects::health_subject("ingest"),
        &proto::HealthRequest {},
        Duration::from_secs(1),
    )
    .await
    .is_some()
}

async fn leave(common: &CommonArgs) -> anyhow::Result<()> {
    let home = common.home_dir();
    let Some(team) = Team::load(&home)? else {
        println!("this machine is in no team");
        return Ok(());
    };
    // This machine's stream on the hub goes, when the hub can be reached: what it shared
    // stays with the members who stored it.
    if let Ok(client) = common::nats::connect(common, "team", Duration::from_secs(2)).await {
        let hub = hub_context(&client);
        match hub
            .delete_stream(subjects::team_member_stream(&team.member))
            .await
        {
            Ok(_) => println!("removed this machine's stream from the hub"),
            Err(error) => println!(
                "this machine's stream stays on the hub ({error}); its owner may remove {}",
                subjects::team_member_stream(&team.member)
            ),
        }
    }
    Team::remove(&home)?;
    println!(
        "left the team {:?}; this machine keeps all its memory",
        team.member
    );
    println!("{}", restart_note(common).await);
    Ok(())
}

fn share(common: &CommonArgs, project: &Path, name: Option<String>) -> anyhow::Result<()> {
    let home = common.home_dir();
    let Some(mut team) = Team::load(&home)? else {
        anyhow::bail!("this machine is in no team; join one first: mneme team join URL");
    };
    let dir = absolute(project)?;
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    let path = hosts::adapter::project_of(&dir.to_string_lossy());
    let name = match name {
        Some(name) => name,
        None => common::team::declared_name(Path::new(&path)).unwrap_or_else(|| {
            Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase().replace([' ', '.'], "-"))
                .unwrap_or_default()
        }),
    };
    anyhow::ensure!(
        common::team::valid_name(&name),
        "{name:?} cannot be a team project name (1 to 48 lowercase letters, digits, '-' or '_'); give one with --as NAME"
    );
    if let Some(other) = team
        .shared
        .iter()
        .find(|s| s.name == name && s.path != path)
    {
        anyhow::bail!(
            "team project {name:?} is already shared from {}; unshare it first or choose another name with --as",
            other.path
        );
    }
    team.shared.retain(|s| s.path != path);
    team.declined.retain(|d| *d != path);
    team.shared.push(Shared {
        name: name.clone(),
        path: path.clone(),
    });
    team.save(&home)?;
    println!(
        "sharing {path} as team project {name:?}: its new memory goes to the team, and the team's memory of {name:?} comes here (every member shares it under this name)"
    );
    Ok(())
}

fn unshare(common: &CommonArgs, project: &str) -> anyhow::Result<()> {
    let home = common.home_dir();
    let Some(mut team) = Team::load(&home)? else {
        anyhow::bail!("this machine is in no team");
    };
    let path = absolute(Path::new(project))
        .ok()
        .filter(|p| p.is_dir())
        .map(|p| hosts::adapter::project_of(&p.to_string_lossy()));
    let (kept, dropped): (Vec<Shared>, Vec<Shared>) = team
        .shared
        .into_iter()
        .partition(|s| s.name != project && Some(&s.path) != path.as_ref());
    team.shared = kept;
    anyhow::ensure!(
        !dropped.is_empty(),
        "{project:?} is not shared; `mneme team status` lists what is"
    );
    // A repository that declares its team name would be shared again by its declaration.
    for shared in dropped {
        if common::team::declared_name(Path::new(&shared.path)).is_some()
            && !team.declined.contains(&shared.path)
        {
            team.declined.push(shared.path);
        }
    }
    team.save(&home)?;
    println!("{project} is no longer shared; what was shared stays with the team");
    Ok(())
}

/// The hub's JetStream, reached through this machine's leaf link.
fn hub_context(client: &async_nats::Client) -> jetstream::Context {
    let mut hub = jetstream::with_domain(client.clone(), subjects::TEAM_HUB_DOMAIN);
    hub.set_timeout(Duration::from_secs(2));
    hub
}

/// Why the hub could not be used, in words a person can act on.
#[derive(Debug)]
enum HubTrouble {
    Unreachable(String),
    NameTaken(String),
}

impl std::fmt::Display for HubTrouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubTrouble::Unreachable(why) => write!(
                f,
                "the hub cannot be reached ({why}); check the URL and credentials in team.yaml, that `mneme up` was restarted after `mneme team join`, and its log for the leaf connection"
            ),
            HubTrouble::NameTaken(name) => write!(
                f,
                "member name {name:?} is taken by another machine of the team (a JetStream domain clash); join again with --name OTHER"
            ),
        }
    }
}

/// Metadata key of the hub's member stream naming the machine that made it.
const MACHINE_KEY: &str = "mneme.machine";

/// Whether the hub holds this machine's stream (`false` when it holds none yet), refusing one
/// made by another machine under the same member name.
async fn member_stream(hub: &jetstream::Context, team: &Team) -> Result<bool, HubTrouble> {
    let name = subjects::team_member_stream(&team.member);
    match hub.get_stream(&name).await {
        Ok(mut stream) => {
            let info = stream
                .info()
                .await
                .map_err(|e| HubTrouble::Unreachable(e.to_string()))?;
            match info.config.metadata.get(MACHINE_KEY) {
                Some(machine) if *machine != team.machine => {
                    Err(HubTrouble::NameTaken(team.member.clone()))
                }
                _ => Ok(true),
            }
        }
        Err(error)
            if matches!(
                error.kind(),
                jetstream::context::GetStreamErrorKind::JetStream(ref e)
                    if e.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
            ) =>
        {
            Ok(false)
        }
        Err(error) => Err(HubTrouble::Unreachable(error.to_string())),
    }
}

/// Make the hub's mirror of this machine's outgoing stream, or find it made by this machine.
async fn ensure_member_stream(hub: &jetstream::Context, team: &Team) -> Result<(), HubTrouble> {
    let name = subjects::team_member_stream(&team.member);
    if member_stream(hub, team).await? {
        return Ok(());
    }
    {
        // Three copies on a clustered hub; a single server hub refuses that, and gets one.
        let mut last = String::new();
        for replicas in [3, 1] {
            let mut config = common::streams::team_member_config(&team.member, replicas);
            config
                .metadata
                .insert(MACHINE_KEY.to_owned(), team.machine.clone());
            match hub.create_stream(config).await {
                Ok(_) => {
                    tracing::info!(stream = %name, replicas, "made this machine's stream on the hub");
                    return Ok(());
                }
                Err(error) => last = error.to_string(),
            }
        }
        Err(HubTrouble::Unreachable(last))
    }
}

/// The other members: every member stream on the hub but this machine's.
async fn other_members(hub: &jetstream::Context, team: &Team) -> Result<Vec<String>, HubTrouble> {
    use futures::TryStreamExt as _;
    let names: Vec<String> = hub
        .stream_names()
        .try_collect()
        .await
        .map_err(|e| HubTrouble::Unreachable(e.to_string()))?;
    let mut members: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix(subjects::TEAM_MEMBER_STREAM_PREFIX))
        .filter(|m| *m != team.member)
        .map(str::to_owned)
        .collect();
    members.sort();
    Ok(members)
}

/// Bring both ends of the replication in line with the team file, once: the hub's mirror of
/// this machine, and this machine's incoming stream sourcing the others' mirrors for the
/// shared projects. With no team, the incoming stream goes.
pub async fn align(client: &async_nats::Client, home: &Path) -> anyhow::Result<()> {
    let local = jetstream::new(client.clone());
    let Some(team) = Team::load(home)? else {
        if local.get_stream(subjects::TEAM_IN_STREAM).await.is_ok() {
            local
                .delete_stream(subjects::TEAM_IN_STREAM)
                .await
                .context("removing the team's incoming stream")?;
            tracing::info!("left the team: stopped receiving the team's memory");
        }
        return Ok(());
    };
    let team = adopt_declared(home, team).await?;
    let hub = hub_context(client);
    ensure_member_stream(&hub, &team).await?;
    let members = other_members(&hub, &team).await?;
    let mut projects: Vec<String> = team.shared.iter().map(|s| s.name.clone()).collect();
    projects.sort();
    projects.dedup();
    let wanted = common::streams::team_in_config(&members, &projects);
    match local.get_stream(subjects::TEAM_IN_STREAM).await {
        Ok(mut stream) => {
            let info = stream.info().await.context("reading the incoming stream")?;
            if info.config.sources != wanted.sources {
                local
                    .update_stream(wanted)
                    .await
                    .context("updating the team's incoming stream")?;
                tracing::info!(
                    members = members.len(),
                    projects = projects.len(),
                    "receiving the team's memory"
                );
            }
        }
        Err(_) => {
            local
                .create_stream(wanted)
                .await
                .context("making the team's incoming stream")?;
            tracing::info!(
                members = members.len(),
                projects = projects.len(),
                "receiving the team's memory"
            );
        }
    }
    Ok(())
}

/// Share the projects of this machine's sessions whose repositories declare a team name
/// (`.mneme/team.yaml`), writing them into the team file so that what the team shares of them
/// comes here too (ingest shares a declared project's events from its first one already).
async fn adopt_declared(home: &Path, team: Team) -> anyhow::Result<Team> {
    let db = home.join("mneme.db");
    if !db.is_file() {
        return Ok(team);
    }
    let store = store::Store::open_read_only(&db)
        .await
        .context("reading this machine's projects")?;
    let projects = archive::sessions::projects(store.pool())
        .await
        .context("reading this machine's projects")?;
    store.close().await;
    let adopt = |team: &mut Team| {
        let mut adopted = false;
        for path in &projects {
            if team.team_project(path).is_some() {
                continue;
            }
            if let Some(name) =
                team.shared_name(path, |p| common::team::declared_name(Path::new(p)))
            {
                tracing::info!(%path, %name, "sharing a project its repository declares for the team");
                team.shared.push(Shared {
                    name,
                    path: path.clone(),
                });
                adopted = true;
            }
        }
        adopted
    };
    if !adopt(&mut team.clone()) {
        return Ok(team);
    }
    // Read again under the lock, so a `mneme team` command changing the file meanwhile keeps
    // its change.
    let _lock = common::team::lock(home)?;
    let Some(mut fresh) = Team::load(home)? else {
        return Ok(team);
    };
    if adopt(&mut fresh) {
        fresh.save(home)?;
    }
    Ok(fresh)
}

/// How often `mneme up` aligns the team's streams: a new member or a new shared project is
/// picked up within this time.
const ALIGN_EVERY: Duration = Duration::from_secs(5);

/// `mneme up`'s part: align every [`ALIGN_EVERY`] until `shutdown`, saying a trouble once
/// until it changes.
pub async fn keep(common: CommonArgs, shutdown: tokio_util::sync::CancellationToken) {
    let client = tokio::select! {
        _ = shutdown.cancelled() => return,
        client = common::nats::connect(&common, "up", Duration::from_secs(60)) => match client {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(error = format!("{error:#}"), "cannot keep the team's streams");
                return;
            }
        },
    };
    let home = common.home_dir();
    let mut said = String::new();
    let mut tick = tokio::time::interval(ALIGN_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = match align(&client, &home).await {
            Ok(()) => String::new(),
            Err(error) => format!("{error:#}"),
        };
        if now != said {
            if now.is_empty() {
                tracing::info!("the team's streams are in place");
            } else {
                tracing::warn!(error = %now, "team");
            }
            said = now;
        }
    }
}

impl std::error::Error for HubTrouble {}

/// What the local nats-server last said about its leaf link, read from its log, as advice a
/// person can act on; `None` when it said nothing the advice covers.
fn leaf_advice(home: &Path) -> Option<String> {
    let log = std::fs::read_to_string(crate::nats_server::log_path(&home.join("nats"))).ok()?;
    let line = log
        .lines()
        .rev()
        .take(2_000)
        .find(|l| l.contains("[ERR]") && l.to_lowercase().contains("leafnode"))?;
    let lower = line.to_lowercase();
    let advice = if lower.contains("authorization") || lower.contains("authentication") {
        "the hub refused this machine's credentials: is the public key of the --nkey seed (or the token) in the hub's users?"
    } else if lower.contains("connection refused")
        || lower.contains("no such host")
        || lower.contains("timeout")
        || lower.contains("unreachable")
    {
        "the hub's leaf node port cannot be reached: check the URL, that the hub listens for leaf nodes (port 7422 by default), and the network between"
    } else if lower.contains("domain") {
        "the hub and this machine disagree about JetStream domains: every member needs a name of its own, and none may be `hub`"
    } else {
        "see the local nats-server's log"
    };
    let said = line.split("[ERR]").nth(1).unwrap_or(line).trim();
    Some(format!("{advice} (nats-server: {said})"))
}

/// What `mneme team status` reports.
#[derive(Debug, Serialize)]
struct Status {
    member: String,
    hub: Vec<String>,
    /// `connected`, or why not.
    link: String,
    projects: Vec<ProjectStatus>,
    members: Vec<MemberStatus>,
}

#[derive(Debug, Serialize)]
struct ProjectStatus {
    name: String,
    path: String,
    /// Shared by this machine in all.
    shared: u64,
    /// Of those, not on the hub yet (unknown while the hub cannot be reached).
    waiting_out: Option<u64>,
    /// Shared by the others on the hub and not here yet.
    waiting_in: Option<u64>,
    /// Received here from the others.
    received: u64,
}

#[derive(Debug, Serialize)]
struct MemberStatus {
    member: String,
    /// When the last event shared by this member arrived here (RFC 3339), if one did.
    last_seen: Option<String>,
}

/// Messages of `stream` under `filter`, 0 when the stream is not there.
async fn count(context: &jetstream::Context, stream: &str, filter: &str) -> Option<u64> {
    let stream = context.get_stream(stream).await.ok()?;
    let info = stream.info_with_subjects(filter).await.ok()?;
    use futures::TryStreamExt as _;
    let counts: Vec<(String, usize)> = info.try_collect().await.ok()?;
    Some(counts.iter().map(|(_, n)| *n as u64).sum())
}

async fn status(common: &CommonArgs, json: bool) -> anyhow::Result<()> {
    let Some(team) = Team::load(&common.home_dir())? else {
        if json {
            println!("null");
        } else {
            println!("this machine is in no team (`mneme team join URL` joins one)");
        }
        return Ok(());
    };
    let client = common::nats::connect(common, "team", Duration::from_secs(3))
        .await
        .context("cannot reach this machine's NATS; is `mneme up` running?")?;
    let local = jetstream::new(client.clone());
    let hub = hub_context(&client);
    let link = match hub.query_account().await {
        Ok(_) => match member_stream(&hub, &team).await {
            Ok(true) => "connected".to_owned(),
            Ok(false) => "connected; this machine's stream is not on the hub yet (`mneme up` makes it within seconds)".to_owned(),
            Err(trouble) => trouble.to_string(),
        },
        Err(error) => {
            let mut said = HubTrouble::Unreachable(error.to_string()).to_string();
            if let Some(advice) = leaf_advice(&common.home_dir()) {
                said = format!("{said}; {advice}");
            }
            said
        }
    };
    let connected = link == "connected";
    let members = if connected {
        other_members(&hub, &team).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut projects = Vec::new();
    for shared in &team.shared {
        let mine = subjects::team_member_subjects(&shared.name, &team.member);
        let out = count(&local, subjects::TEAM_OUT_STREAM, &mine)
            .await
            .unwrap_or(0);
        let received = count(
            &local,
            subjects::TEAM_IN_STREAM,
            &subjects::team_project_subjects(&shared.name),
        )
        .await
        .unwrap_or(0);
        let (mut waiting_out, mut waiting_in) = (None, None);
        if connected {
            let on_hub = count(&hub, &subjects::team_member_stream(&team.member), &mine)
                .await
                .unwrap_or(0);
            waiting_out = Some(out.saturating_sub(on_hub));
            let mut theirs = 0;
            for member in &members {
                theirs += count(
                    &hub,
                    &subjects::team_member_stream(member),
                    &subjects::team_project_subjects(&shared.name),
                )
                .await
                .unwrap_or(0);
            }
            waiting_in = Some(theirs.saturating_sub(received));
        }
        projects.push(ProjectStatus {
            name: shared.name.clone(),
            path: shared.path.clone(),
            shared: out,
            waiting_out,
            waiting_in,
            received,
        });
    }
    let mut seen = Vec::new();
    if let Ok(stream) = local.get_stream(subjects::TEAM_IN_STREAM).await {
        let mut names = members.clone();
        if names.is_empty() {
            // Offline: the members are those whose events arrived.
            names = team_members_in(&stream).await;
        }
        for member in names {
            let last = stream
                .get_last_raw_message_by_subject(&subjects::team_member_subjects("*", &member))
                .await
                .ok()
                .map(|m| m.time.to_string());
            seen.push(MemberStatus {
                member,
                last_seen: last,
            });
        }
    }
    let status = Status {
        member: team.member.clone(),
        hub: team.hub.clone(),
        link,
        projects,
        members: seen,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(());
    }
    println!(
        "member {:?} of the team at {}\nlink: {}",
        status.member,
        status.hub.join(", "),
        status.link
    );
    if status.projects.is_empty() {
        println!("no project shared (`mneme team share DIR`)");
    }
    let shown = |n: Option<u64>| n.map_or("?".to_owned(), |n| n.to_string());
    for p in &status.projects {
        println!(
            "project {:?} ({}): shared {}, waiting to go out {}, received {}, waiting to come in {}",
            p.name,
            p.path,
            p.shared,
            shown(p.waiting_out),
            p.received,
            shown(p.waiting_in)
        );
        if connected && p.received == 0 && p.waiting_in == Some(0) && !members.is_empty() {
            println!(
                "  nothing of {:?} came from the others yet: do they share it under this name?",
                p.name
            );
        }
    }
    for m in &status.members {
        println!(
            "member {:?}: last event {}",
            m.member,
            m.last_seen.as_deref().unwrap_or("none yet")
        );
    }
    Ok(())
}

/// The members whose events are in the incoming stream.
async fn team_members_in(stream: &jetstream::stream::Stream) -> Vec<String> {
    let stream = stream.clone();
    let Ok(info) = stream.info_with_subjects(subjects::TEAM_ALL).await else {
        return Vec::new();
    };
    use futures::TryStreamExt as _;
    let subjects: Vec<(String, usize)> = info.try_collect().await.unwrap_or_default();
    let mut members: Vec<String> = subjects.iter().filter_map(|(s, _)| member_of(s)).collect();
    members.sort();
    members.dedup();
    members
}

/// The member of a team subject.
fn member_of(subject: &str) -> Option<String> {
    subjects::parse_team_subject(subject).map(|(_, member, _)| member.to_owned())
}
