//! The registry of agent hosts `mneme-hook` understands. A new host is one module with a
//! [`Host`] constant and one line in [`HOSTS`] (and a value in `proto`'s `Agent` enum).

use crate::adapter::Host;

/// Every host, by the name `mneme-hook <name>` takes.
pub const HOSTS: [&Host; 6] = [
    &crate::claude_code::HOST,
    &crate::kimi::HOST,
    &crate::codex::HOST,
    &crate::cursor::HOST,
    &crate::kiro::HOST,
    &crate::gemini::HOST,
];

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
    }
}
