//! `mneme capabilities`: the capability registry from the command line. The files are the
//! source of truth (`capabilities` reads, merges and scans them); retrieval holds a copy it
//! can match prompts against, which every command that changes the files brings up to date
//! (`mneme.retrieval.capabilities.sync`, one request per scope).

use anyhow::Context as _;
use common::CommonArgs;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum CapabilitiesCommand {
    /// Find the skills, commands, subagents and MCP servers of every agent host, and the
    /// project's tasks (Makefile, justfile, package.json, cargo aliases, pyproject, Taskfile),
    /// without running anything; write them to capabilities.generated.yaml and sync.
    Scan(Where),
    /// List the capabilities in force (the files merged), and what in them could not be used.
    List {
        #[command(flatten)]
        at: Where,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add a capability to the hand-written capabilities.yaml (the project's with --project).
    Add {
        #[command(flatten)]
        at: Where,
        #[arg(long)]
        id: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        category: String,
        /// skill, command, agent, mcp-tool, mcp-server, task or tool.
        #[arg(long)]
        kind: String,
        #[arg(long)]
        description: String,
        /// How to invoke it (a command, a slash command, an MCP tool, a skill's name).
        #[arg(long)]
        invoke: String,
        /// An intent it serves, in a user's words (repeatable).
        #[arg(long = "when")]
        when: Vec<String>,
    },
    /// Remove a capability from the hand-written capabilities.yaml.
    Remove {
        #[command(flatten)]
        at: Where,
        id: String,
    },
    /// Show exactly what would be injected with PROMPT, with scores.
    Match {
        #[command(flatten)]
        at: Where,
        prompt: String,
        /// Print JSON: a list of matches (empty when nothing clears the threshold).
        #[arg(long)]
        json: bool,
        /// flat (every capability) or two-stage (categories first).
        #[arg(long, default_value = "flat")]
        strategy: String,
    },
}

/// Which registry: the user's, and the project's when given.
#[derive(Debug, clap::Args)]
pub struct Where {
    #[command(flatten)]
    common: CommonArgs,
    /// The project's directory (its registry is in its .mneme/).
    #[arg(long)]
    project: Option<PathBuf>,
}

impl Where {
    fn project(&self) -> anyhow::Result<Option<PathBuf>> {
        self.project
            .as_ref()
            .map(|p| std::fs::canonicalize(p).with_context(|| format!("project {}", p.display())))
            .transpose()
    }

    fn locations(&self) -> anyhow::Result<capabilities::Locations> {
        let mut locations = capabilities::Locations::from_env();
        if let Some(home) = &self.common.home {
            locations.user_dirs[0] = home.clone();
        }
        Ok(match self.project()? {
            Some(project) => locations.with_project(project),
            None => locations,
        })
    }
}

pub async fn run(command: CapabilitiesCommand) -> anyhow::Result<()> {
    match command {
        CapabilitiesCommand::Scan(at) => scan(&at).await,
        CapabilitiesCommand::List { at, json } => list(&at, json),
        CapabilitiesCommand::Add {
            at,
            id,
            name,
            category,
            kind,
            description,
            invoke,
            when,
        } => {
            let kind = capabilities::Kind::from_name(&kind).with_context(|| {
                format!("unknown kind {kind:?}: skill, command, agent, mcp-tool, mcp-server, task or tool")
            })?;
            let capability = capabilities::Capability {
                id,
                name,
                category,
                kind,
                description,
                when,
                invoke,
                source: "hand-written".to_owned(),
                disabled: false,
                scope: capabilities::Scope::User,
            };
            let file = hand_file(&at)?;
            capabilities::add(&file, &capability)?;
            println!("added {} to {}", capability.id, file.display());
            sync(&at).await
        }
        CapabilitiesCommand::Remove { at, id } => {
            let file = hand_file(&at)?;
            if capabilities::remove(&file, &id)? {
                println!("removed {id} from {}", file.display());
            } else {
                anyhow::bail!("{} has no capability {id:?}", file.display());
            }
            sync(&at).await
        }
        CapabilitiesCommand::Match {
            at,
            prompt,
            json,
            strategy,
        } => match_prompt(&at, &prompt, json, &strategy).await,
    }
}

/// The hand-written file `add` and `remove` change: the project's with --project, else the
/// user's in mneme's home.
fn hand_file(at: &Where) -> anyhow::Result<PathBuf> {
    let locations = at.locations()?;
    let file = if at.project.is_some() {
        locations.project_hand()
    } else {
        locations.user_hand()
    };
    file.context("no registry directory")
}

async fn scan(at: &Where) -> anyhow::Result<()> {
    let locations = at.locations()?;
    for written in write_scan(&locations)? {
        println!(
            "{} capabilities found: {} ({})",
            written.found,
            written.file.display(),
            if written.changed {
                "written"
            } else {
                "unchanged"
            }
        );
    }
    sync(at).await
}

/// A generated registry file a scan wrote, or found unchanged.
struct Written {
    file: PathBuf,
    found: usize,
    changed: bool,
}

/// Scan every host's capability places (and the project's tasks, with a project) and write
/// what was found to the generated files, replaced only when it changed.
fn write_scan(locations: &capabilities::Locations) -> anyhow::Result<Vec<Written>> {
    let home = hosts::paths::home().context("no home directory ($HOME) to scan")?;
    let project = locations.project.clone();
    let found = capabilities::scan(&home, project.as_deref());
    let mut written = Vec::new();
    if let Some(file) = locations.user_generated() {
        if let Some(dir) = file.parent() {
            store::private_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let changed = capabilities::write_generated(&file, &found.user)
            .with_context(|| format!("writing {}", file.display()))?;
        written.push(Written {
            file,
            found: found.user.len(),
            changed,
        });
    }
    if let (Some(file), Some(_)) = (locations.project_generated(), &project) {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let changed = capabilities::write_generated(&file, &found.project)
            .with_context(|| format!("writing {}", file.display()))?;
        written.push(Written {
            file,
            found: found.project.len(),
            changed,
        });
    }
    Ok(written)
}

/// `mneme up`'s rescan of the user's registry, once retrieval answers: skills, commands,
/// subagents and MCP servers installed or removed since the last scan reach the matching
/// without anyone running `mneme capabilities scan`. Only a changed registry is synced, so a
/// start with nothing new embeds nothing.
pub async fn rescan_at_start(common: CommonArgs) {
    let at = Where {
        common,
        project: None,
    };
    let result = async {
        let locations = at.locations()?;
        let written = write_scan(&locations)?;
        if written.iter().any(|w| w.changed) {
            for line in sync_scopes(&at).await? {
                tracing::info!("{line}");
            }
        }
        anyhow::Ok(written)
    }
    .await;
    match result {
        Ok(written) => {
            for w in written {
                tracing::info!(file = %w.file.display(), found = w.found, changed = w.changed, "capabilities rescanned");
            }
        }
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "rescanning the capabilities failed")
        }
    }
}

fn list(at: &Where, json: bool) -> anyhow::Result<()> {
    let registry = capabilities::load(&at.locations()?);
    if json {
        let entries: Vec<serde_json::Value> = registry
            .capabilities
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id, "name": c.name, "category": c.category, "kind": c.kind.as_str(),
                    "description": c.description, "when": c.when, "invoke": c.invoke,
                    "source": c.source, "scope": scope_name(&c.scope),
                })
            })
            .collect();
        let problems: Vec<String> = registry.problems.iter().map(|p| p.to_string()).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"capabilities": entries, "problems": problems})
            )?
        );
        return Ok(());
    }
    for c in &registry.capabilities {
        println!(
            "{:<28} {:<10} {:<14} {}  ({})",
            c.id,
            c.kind.as_str(),
            c.category,
            c.invoke,
            scope_name(&c.scope)
        );
    }
    for problem in &registry.problems {
        eprintln!("{problem}");
    }
    println!("{} capabilities", registry.capabilities.len());
    Ok(())
}

fn scope_name(scope: &capabilities::Scope) -> String {
    match scope {
        capabilities::Scope::User => "user".to_owned(),
        capabilities::Scope::Project(p) => p.clone(),
    }
}

/// Send each scope's merged registry to retrieval and say what happened.
async fn sync(at: &Where) -> anyhow::Result<()> {
    for line in sync_scopes(at).await? {
        println!("{line}");
    }
    Ok(())
}

/// Send each scope's merged registry to retrieval, so matching uses what the files say now;
/// returns a line for a person per scope (the problems in the files go to stderr).
async fn sync_scopes(at: &Where) -> anyhow::Result<Vec<String>> {
    let locations = at.locations()?;
    let registry = capabilities::load(&locations);
    for problem in &registry.problems {
        eprintln!("{problem}");
    }
    let mut scopes = vec![capabilities::Scope::User];
    if let Some(project) = &locations.project {
        scopes.push(capabilities::Scope::Project(project.display().to_string()));
    }
    let mut said = Vec::new();
    for scope in scopes {
        let request =
            capabilities::sync_request(&scope, &registry.capabilities, &registry.categories);
        let name = request.scope.clone();
        // Embedding a large registry the first time takes a while on two cores.
        let Some(reply) = common::nats::ask::<proto::SyncCapabilitiesReply>(
            &at.common,
            proto::subjects::CAPABILITIES_SYNC,
            &request,
            Duration::from_secs(300),
        )
        .await
        else {
            said.push(
                "retrieval is not reachable: the registry reaches it with the next scan, add or remove while mneme runs".to_owned(),
            );
            return Ok(said);
        };
        anyhow::ensure!(reply.error.is_empty(), "retrieval: {}", reply.error);
        said.push(format!(
            "synced with retrieval: {} capabilities for {} ({} embedded)",
            reply.capabilities,
            if name.is_empty() { "the user" } else { &name },
            reply.changed
        ));
    }
    Ok(said)
}

async fn match_prompt(at: &Where, prompt: &str, json: bool, strategy: &str) -> anyhow::Result<()> {
    let project = at
        .project()?
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| {
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        });
    let reply = common::nats::ask::<proto::MatchCapabilitiesReply>(
        &at.common,
        proto::subjects::CAPABILITIES_MATCH,
        &proto::MatchCapabilitiesRequest {
            prompt: prompt.to_owned(),
            project,
            strategy: strategy.to_owned(),
            ..Default::default()
        },
        Duration::from_secs(10),
    )
    .await
    .context("retrieval did not answer: start mneme with `mneme up`")?;
    anyhow::ensure!(reply.error.is_empty(), "retrieval: {}", reply.error);
    if json {
        let matches: Vec<serde_json::Value> = reply
            .matches
            .iter()
            .filter_map(|m| {
                let c = m.capability.as_ref()?;
                Some(serde_json::json!({
                    "id": c.id, "name": c.name, "category": c.category, "kind": c.kind,
                    "invoke": c.invoke, "score": m.score,
                    "scope": if m.scope.is_empty() { "user" } else { m.scope.as_str() },
                }))
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&matches)?);
        return Ok(());
    }
    if reply.matches.is_empty() {
        println!("(nothing would be injected)");
        return Ok(());
    }
    for m in &reply.matches {
        if let Some(c) = &m.capability {
            println!("{:.3}  {}  ({})", m.score, c.id, c.invoke);
        }
    }
    print!(
        "{}",
        retrieval::capabilities::render(&reply.matches, 10_000)
    );
    Ok(())
}
