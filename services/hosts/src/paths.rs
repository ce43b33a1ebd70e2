//! Where a host's files are found: the home directory and directories named by environment
//! variables, read one way for installing and for importing alike.

use std::path::PathBuf;

/// The user's home directory (`HOME`, or `USERPROFILE` on Windows); an empty value is unset.
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// A directory named by an environment variable; an empty value counts as unset.
pub fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
