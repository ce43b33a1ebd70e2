//! This machine's place in a team: the file `team.yaml` in mneme's data directory, written by
//! `mneme team` and read by `mneme up` (which makes its `nats-server` a leaf node of the hub
//! with it) and by ingest (which shares the events of the shared projects, and stores what the
//! team shares under this machine's own checkout of each project).
//!
//! The file holds no secret: the hub's credentials stay in the file the person named, which
//! `mneme up` reads into its own owner-only server configuration at every start.

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The name of the team file in mneme's data directory.
pub const FILE: &str = "team.yaml";

/// The file a repository declares its team name in (`project: NAME`), for everyone who clones
/// it.
pub const REPOSITORY_FILE: &str = ".mneme/team.yaml";

/// This machine's team settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Team {
    /// The hub's leaf node URLs (`nats-leaf://host:7422`), without credentials.
    pub hub: Vec<String>,
    /// This machine's name in the team: the JetStream domain of its own server and the name of
    /// its stream on the hub, so unique in the team.
    pub member: String,
    /// A random id of this machine, made when it joined, which the hub's stream of this member
    /// carries: another machine asking for the same member name is told the name is taken.
    pub machine: String,
    /// How this machine's server authenticates to the hub, when it has to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<Credentials>,
    /// The projects this machine shares, each under its team name.
    #[serde(default)]
    pub shared: Vec<Shared>,
    /// Checkouts whose repository declares a team name (`.mneme/team.yaml`) that this machine
    /// was told not to share (`mneme team unshare`), so the declaration is not taken up again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<String>,
}

/// A file holding the hub's credentials for this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Credentials {
    /// An NKey user seed (`SU…`) the hub lists by its public key.
    Nkey(PathBuf),
    /// A credentials file (a user JWT with its seed), for a hub in operator mode.
    Creds(PathBuf),
    /// A token, or `user:password`, that the hub's leaf node authorization accepts.
    TokenFile(PathBuf),
}

/// One shared project: its name in the team and its checkout on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shared {
    pub name: String,
    pub path: String,
}

/// The team file held for one change: `mneme team`'s commands and `mneme up`'s adoption of
/// declared projects read, change and write it under this lock, so neither loses the other's
/// change. Let go when dropped.
pub struct Lock {
    _file: std::fs::File,
}

/// Wait for, and take, the lock on the team file in `home`.
pub fn lock(home: &Path) -> anyhow::Result<Lock> {
    let path = home.join(format!("{FILE}.lock"));
    store::private_file(&path).with_context(|| format!("creating {}", path.display()))?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(Lock { _file: file })
}

/// What a repository's `.mneme/team.yaml` says.
#[derive(Debug, Deserialize)]
struct RepositoryFile {
    project: String,
}

/// Whether `name` can be a team project or member name: it becomes a NATS subject token, a
/// stream name and a JetStream domain, so lowercase letters, digits, `-` and `_`, 1 to 48 of
/// them.
pub fn valid_name(name: &str) -> bool {
    (1..=48).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The team name a repository declares in its `.mneme/team.yaml`, if it declares a valid one.
pub fn declared_name(project: &Path) -> Option<String> {
    let text = std::fs::read_to_string(project.join(REPOSITORY_FILE)).ok()?;
    let file: RepositoryFile = yaml_serde::from_str(&text).ok()?;
    valid_name(&file.project).then_some(file.project)
}

impl Team {
    /// The team file in `home`, or `None` when this machine is in no team.
    pub fn load(home: &Path) -> anyhow::Result<Option<Team>> {
        let path = home.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        let team: Team =
            yaml_serde::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        team.check()
            .with_context(|| format!("in {}", path.display()))?;
        Ok(Some(team))
    }

    /// Write the team file in `home`, owner-only, replacing it by rename.
    pub fn save(&self, home: &Path) -> anyhow::Result<()> {
        self.check()?;
        let path = home.join(FILE);
        let text = format!(
            "# This machine's team, written by `mneme team`; `mneme team status` shows it at work.\n{}",
            yaml_serde::to_string(self).context("writing the team file")?
        );
        let temporary = home.join(format!("{FILE}.new"));
        store::private_file(&temporary)
            .with_context(|| format!("creating {}", temporary.display()))?;
        std::fs::write(&temporary, text)
            .with_context(|| format!("writing {}", temporary.display()))?;
        std::fs::rename(&temporary, &path).with_context(|| format!("writing {}", path.display()))
    }

    /// Remove the team file from `home`; true when there was one.
    pub fn remove(home: &Path) -> anyhow::Result<bool> {
        let path = home.join(FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error).with_context(|| format!("removing {}", path.display())),
        }
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            valid_name(&self.member),
            "member name {:?} must be 1 to 48 lowercase letters, digits, '-' or '_'",
            self.member
        );
        anyhow::ensure!(
            self.member != proto::subjects::TEAM_HUB_DOMAIN,
            "member name {:?} is the hub's JetStream domain; choose another",
            self.member
        );
        anyhow::ensure!(!self.hub.is_empty(), "no hub URL");
        for url in &self.hub {
            anyhow::ensure!(
                !url.contains('@'),
                "the hub URL {url:?} carries credentials; give them in a file (--nkey, --creds or --token-file)"
            );
        }
        for shared in &self.shared {
            anyhow::ensure!(
                valid_name(&shared.name),
                "team project name {:?} must be 1 to 48 lowercase letters, digits, '-' or '_'",
                shared.name
            );
        }
        Ok(())
    }

    /// The team name of the project at `project` (a checkout's path), when this machine shares
    /// it.
    pub fn team_project(&self, project: &str) -> Option<&str> {
        self.shared
            .iter()
            .find(|s| s.path == project)
            .map(|s| s.name.as_str())
    }

    /// The team name under which the project at `project` is shared: the one this machine
    /// chose, else the one its repository declares, unless this machine declined it.
    /// `declared` reads a repository's declaration (callers cache it).
    pub fn shared_name(
        &self,
        project: &str,
        declared: impl FnOnce(&str) -> Option<String>,
    ) -> Option<String> {
        if let Some(name) = self.team_project(project) {
            return Some(name.to_owned());
        }
        if project.is_empty() || self.declined.iter().any(|d| d == project) {
            return None;
        }
        declared(project).filter(|name| self.local_path(name).is_none())
    }

    /// This machine's checkout of the team project `name`, when it shares it.
    pub fn local_path(&self, name: &str) -> Option<&str> {
        self.shared
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.path.as_str())
    }

    /// The `leafnodes` block of this machine's `nats-server` configuration: one remote, the hub,
    /// with the credentials read from their file (the configuration is owner-only), and nothing
    /// of mneme's own subjects crossing the link in either direction, so the hub and the other
    /// members can neither ask this machine's services nor answer its hook. Only JetStream's
    /// own traffic (the hub's mirror of what this machine shares, and this machine's sources of
    /// what the others share) goes over it.
    pub fn leaf_block(&self) -> anyhow::Result<String> {
        let mut urls = self.hub.clone();
        let mut secret_line = String::new();
        match &self.credentials {
            None => {}
            Some(Credentials::Nkey(path)) => {
                let seed = crate::nats::read_seed(path)?;
                secret_line = format!("      nkey: {seed:?}\n");
            }
            Some(Credentials::Creds(path)) => {
                secret_line = format!("      credentials: {:?}\n", path.display().to_string());
            }
            Some(Credentials::TokenFile(path)) => {
                let token = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the token file {}", path.display()))?;
                let token = token.trim();
                anyhow::ensure!(
                    !token.is_empty(),
                    "the token file {} is empty",
                    path.display()
                );
                anyhow::ensure!(
                    !token.contains(['@', '/', ' ']),
                    "the token in {} holds '@', '/' or a space, which cannot go in a URL",
                    path.display()
                );
                urls = urls
                    .iter()
                    .map(|url| match url.split_once("://") {
                        Some((scheme, rest)) => format!("{scheme}://{token}@{rest}"),
                        None => format!("{token}@{url}"),
                    })
                    .collect();
            }
        }
        let urls = urls
            .iter()
            .map(|u| format!("{u:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(format!(
            "leafnodes {{\n  reconnect: 2\n  remotes: [\n    {{\n      urls: [{urls}]\n{secret_line}      deny_imports: [\"mneme.>\"]\n      deny_exports: [\"mneme.>\"]\n    }}\n  ]\n}}\n"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team() -> Team {
        Team {
            hub: vec!["nats-leaf://hub.example:7422".to_owned()],
            member: "alice-laptop".to_owned(),
            machine: "0123456789abcdef".to_owned(),
            credentials: None,
            shared: vec![Shared {
                name: "payments".to_owned(),
                path: "/src/payments".to_owned(),
            }],
            declined: Vec::new(),
        }
    }

    #[test]
    fn the_team_file_is_written_owner_only_and_read_back() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(Team::load(home.path()).unwrap(), None);
        team().save(home.path()).unwrap();
        assert_eq!(Team::load(home.path()).unwrap(), Some(team()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(home.path().join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(team().team_project("/src/payments"), Some("payments"));
        assert_eq!(team().team_project("/src/other"), None);
        assert_eq!(team().local_path("payments"), Some("/src/payments"));
        assert!(Team::remove(home.path()).unwrap());
        assert!(!Team::remove(home.path()).unwrap());
    }

    #[test]
    fn names_that_cannot_be_subjects_or_domains_are_refused() {
        for bad in ["", "a.b", "A", "a b", "a>", "hub"] {
            let mut t = team();
            t.member = bad.to_owned();
            assert!(
                t.save(tempfile::tempdir().unwrap().path()).is_err(),
                "{bad:?}"
            );
        }
        let mut t = team();
        t.hub = vec!["nats-leaf://user:pw@hub:7422".to_owned()];
        let error = t.check().unwrap_err().to_string();
        assert!(error.contains("in a file"), "{error}");
    }

    #[test]
    fn the_leaf_block_keeps_mneme_subjects_home_and_reads_the_token_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let mut t = team();
        t.credentials = Some(Credentials::TokenFile(token));
        let block = t.leaf_block().unwrap();
        assert!(
            block.contains("\"nats-leaf://s3cret@hub.example:7422\""),
            "{block}"
        );
        assert!(block.contains("deny_imports: [\"mneme.>\"]"));
        assert!(block.contains("deny_exports: [\"mneme.>\"]"));
    }

    #[test]
    fn a_declared_name_is_taken_unless_declined_or_already_used() {
        let mut t = team();
        let declared = |_: &str| Some("billing".to_owned());
        assert_eq!(
            t.shared_name("/src/payments", declared).as_deref(),
            Some("payments")
        );
        assert_eq!(
            t.shared_name("/src/billing", declared).as_deref(),
            Some("billing")
        );
        assert_eq!(t.shared_name("/src/other", |_| None), None);
        // A second checkout declaring a name this machine already shares from elsewhere.
        assert_eq!(
            t.shared_name("/src/copy", |_| Some("payments".to_owned())),
            None
        );
        t.declined.push("/src/billing".to_owned());
        assert_eq!(t.shared_name("/src/billing", declared), None);
    }

    #[test]
    fn a_repository_declares_its_team_name() {
        let repo = tempfile::tempdir().unwrap();
        assert_eq!(declared_name(repo.path()), None);
        std::fs::create_dir(repo.path().join(".mneme")).unwrap();
        std::fs::write(repo.path().join(REPOSITORY_FILE), "project: payments\n").unwrap();
        assert_eq!(declared_name(repo.path()), Some("payments".to_owned()));
        std::fs::write(repo.path().join(REPOSITORY_FILE), "project: Not Valid\n").unwrap();
        assert_eq!(declared_name(repo.path()), None);
    }
}
