//! Defaults the hook client and the services must agree on without any configuration.
//!
//! They live in the contract crate because the hook deliberately depends on nothing heavier.

use std::path::PathBuf;

/// Where a local nats-server listens by default, and where everything looks for it.
pub const NATS_URL: &str = "nats://127.0.0.1:4222";

/// The data directory: `MNEME_HOME`, else `$XDG_DATA_HOME/mneme`, else `~/.local/share/mneme`.
pub fn home() -> PathBuf {
    if let Some(dir) = std::env::var_os("MNEME_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("mneme");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/mneme")
}

/// The hook's spool directory under a data directory.
pub fn spool_dir(home: &std::path::Path) -> PathBuf {
    home.join("spool")
}

/// The directory of the NATS identities' seed files (`<role>.nk`) under a data directory: what
/// `mneme up` creates for its own server, and where the hook and the command line look for
/// their keys when no credential is configured.
pub fn nats_keys_dir(home: &std::path::Path) -> PathBuf {
    home.join("nats-keys")
}
