//! Everything mneme knows about each agent host, one folder a host.
//!
//! A host's folder holds its adapter (`adapter.rs`: hook payload → [`proto::Event`], context →
//! the host's stdout), its install rules (`install.rs`: where its settings files are and how
//! mneme's hook and MCP entries are merged into them), its history import (`import.rs`: its own
//! session files → the hook payloads it would have sent) and, in `mod.rs`, its [`Host`] entry
//! with the places it keeps capabilities (skills, commands, subagents, MCP servers).
//! One line, `registry!`, names every host's folder and makes [`HOSTS`].
//!
//! The hook links only the adapters: install and import are behind the `install` and `import`
//! features, which the command line turns on and `mneme-hook` does not, so the hook carries no
//! TOML editing, file walking or transcript replay.
//!
//! Adding a host is one folder and its name in the `registry!` line (plus a value in `proto`'s
//! `Agent`).

pub mod adapter;
pub mod capabilities;
#[cfg(feature = "install")]
pub mod edit;
#[cfg(feature = "import")]
pub mod import;
#[cfg(feature = "install")]
pub mod install;
#[cfg(any(feature = "install", feature = "import"))]
pub mod paths;

pub mod claude_code;
pub mod codex;
pub mod cursor;
pub mod gemini;
pub mod kimi;
pub mod kiro;

use adapter::Adapter;
use capabilities::Capability;
use proto::Agent;

/// One agent host: its names, its adapter, and where it keeps the capabilities an agent can
/// use. How mneme is installed into it and how its history is imported are asked of it
/// ([`Host::install`], [`Host::import`]) rather than held, so that a binary that never asks
/// (the hook) links neither, whatever features the workspace build turned on.
pub struct Host {
    /// The name given to `mneme-hook <name>` and used in subjects and the store.
    pub name: &'static str,
    /// Other names `mneme-hook` and the command line accept for this host.
    pub aliases: &'static [&'static str],
    pub agent: Agent,
    pub adapter: Adapter,
    pub capabilities: &'static [Capability],
}

/// The registry: each host's folder, once. It makes [`HOSTS`] and the tables behind
/// [`Host::install`] and [`Host::import`], in the same order.
macro_rules! registry {
    ($($host:ident),* $(,)?) => {
        /// Every host, by the name `mneme-hook <name>` takes.
        pub const HOSTS: [&Host; [$(stringify!($host)),*].len()] = [$(&$host::HOST),*];

        #[cfg(feature = "install")]
        static INSTALLS: [&install::Install; HOSTS.len()] = [$(&$host::install::INSTALL),*];

        #[cfg(feature = "import")]
        static IMPORTS: [Option<import::Import>; HOSTS.len()] = [$($host::IMPORT),*];
    };
}

registry!(claude_code, kimi, codex, cursor, kiro, gemini);

impl Host {
    /// This host's place in [`HOSTS`].
    #[cfg(any(feature = "install", feature = "import"))]
    fn index(&self) -> usize {
        HOSTS
            .iter()
            .position(|host| host.name == self.name)
            .expect("every host is in the registry")
    }

    /// How mneme is installed into this host.
    #[cfg(feature = "install")]
    pub fn install(&self) -> &'static install::Install {
        INSTALLS[self.index()]
    }

    /// How this host's history is imported; `None` for a host that keeps no history mneme can
    /// read (Cursor).
    #[cfg(feature = "import")]
    pub fn import(&self) -> Option<&'static import::Import> {
        IMPORTS[self.index()].as_ref()
    }
}

/// The host called `name` (or one of its aliases).
pub fn find(name: &str) -> Option<&'static Host> {
    HOSTS
        .iter()
        .copied()
        .find(|host| host.name == name || host.aliases.contains(&name))
}

/// The names of every host, for messages.
pub fn names() -> Vec<&'static str> {
    HOSTS.iter().map(|host| host.name).collect()
}

/// The host called `name`, or an error listing the known ones.
pub fn named(name: &str) -> Result<&'static Host, UnknownHost> {
    find(name).ok_or_else(|| UnknownHost(name.to_owned()))
}

/// A host name no entry of [`HOSTS`] answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownHost(pub String);

impl std::fmt::Display for UnknownHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown agent {:?}; known: {}",
            self.0,
            names().join(", ")
        )
    }
}

impl std::error::Error for UnknownHost {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_is_found_by_name_and_has_its_own_agent() {
        for host in HOSTS {
            assert_eq!(find(host.name).map(|h| h.name), Some(host.name));
            assert_eq!(proto::Agent::from_slug(host.name), Some(host.agent));
            for alias in host.aliases {
                assert_eq!(find(alias).map(|h| h.name), Some(host.name));
            }
        }
        assert!(find("vim").is_none());
        assert!(
            named("vim")
                .err()
                .unwrap()
                .to_string()
                .contains("claude-code")
        );
    }

    /// Every host lives in a folder of its own whose name is its name, and that folder is named
    /// in `registry!`: a host added as one folder and one name there is complete, and a folder
    /// left out of the registry fails this test.
    #[test]
    fn each_host_is_one_folder_and_one_registry_line() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut folders: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        folders.sort();
        let mut registered: Vec<String> = HOSTS.iter().map(|h| h.name.replace('-', "_")).collect();
        registered.sort();
        assert_eq!(
            folders, registered,
            "one folder per host under src/, each named in registry!"
        );
        for folder in &folders {
            let dir = src.join(folder);
            assert!(
                dir.join("mod.rs").is_file(),
                "{folder}/mod.rs declares the host"
            );
            assert!(
                dir.join("adapter.rs").is_file(),
                "{folder}/adapter.rs maps its payloads"
            );
            assert!(
                dir.join("install.rs").is_file(),
                "{folder}/install.rs installs mneme"
            );
        }
        // Every agent proto knows has a host, and every host a distinct agent.
        let mut agents: Vec<i32> = HOSTS.iter().map(|h| h.agent as i32).collect();
        agents.sort();
        agents.dedup();
        assert_eq!(agents.len(), HOSTS.len());
    }

    #[cfg(feature = "import")]
    #[test]
    fn a_host_without_an_import_file_has_no_import() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for host in HOSTS {
            let file = src.join(host.name.replace('-', "_")).join("import.rs");
            assert_eq!(file.is_file(), host.import().is_some(), "{}", host.name);
        }
    }
}
