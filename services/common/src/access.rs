//! The NATS identities of one mneme deployment on disk: a directory holding one NKey seed per
//! role (`<role>.nk`, owner-only), and the `authorization` block a `nats-server` needs to admit
//! them with the permissions of [`proto::access`].
//!
//! `mneme up` makes the set on first start for the server it runs; `mneme nats-key --users DIR`
//! makes it for a box or a hub, and prints the block for that server's configuration.

use anyhow::Context as _;
use proto::access::Role;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One identity of a key set: its role and public key (no secret).
#[derive(Debug, Clone)]
pub struct User {
    pub role: Role,
    pub public_key: String,
}

/// Write a new NKey user seed to `path`, owner-only, never replacing an existing file; returns
/// the public key.
pub fn new_seed_file(path: &Path) -> anyhow::Result<String> {
    let key = nkeys::KeyPair::new_user();
    let seed = key.seed().context("encoding the new seed")?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).with_context(|| {
        format!(
            "creating {} (an existing key is never replaced)",
            path.display()
        )
    })?;
    writeln!(file, "{seed}").with_context(|| format!("writing {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(key.public_key())
}

/// The public key of the seed in `path`.
pub fn public_key(path: &Path) -> anyhow::Result<String> {
    let seed = crate::nats::read_seed(path)?;
    let key = nkeys::KeyPair::from_seed(&seed)
        .with_context(|| format!("{} does not hold a valid nkey seed", path.display()))?;
    Ok(key.public_key())
}

/// Make every role's seed that `dir` does not hold yet (the directory owner-only, each seed
/// 0600), keeping the ones it holds, and return the whole set.
pub fn ensure_keys(dir: &Path) -> anyhow::Result<Vec<User>> {
    store::private_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    Role::ALL
        .iter()
        .map(|&role| {
            let path = dir.join(role.key_file());
            let public_key = if path.exists() {
                public_key(&path)?
            } else {
                new_seed_file(&path)?
            };
            Ok(User { role, public_key })
        })
        .collect()
}

/// The seed file the client `mneme-<client>` uses from a keys directory, when it holds one.
pub fn seed_in(dir: &Path, client: &str) -> Option<PathBuf> {
    let path = dir.join(Role::of_client(client).key_file());
    path.is_file().then_some(path)
}

/// The `authorization` block of a nats-server configuration admitting `users`, each with its
/// role's permissions and nothing more; a connection without one of these keys is refused.
pub fn authorization(users: &[User]) -> String {
    let list = |subjects: &[String]| {
        subjects
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = String::from("authorization {\n  users = [\n");
    for user in users {
        let permissions = user.role.permissions();
        text.push_str(&format!(
            "    # {}\n    {{ nkey: {:?}, permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }}{} }} }}\n",
            user.role.name(),
            user.public_key,
            list(&permissions.publish),
            list(&permissions.subscribe),
            if permissions.allow_responses {
                ", allow_responses: true"
            } else {
                ""
            },
        ));
    }
    text.push_str("  ]\n}\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_is_made_once_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let first = ensure_keys(&keys).unwrap();
        let second = ensure_keys(&keys).unwrap();
        assert_eq!(first.len(), Role::ALL.len());
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.public_key, b.public_key);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&keys), 0o700);
            assert_eq!(mode(&keys.join("hook.nk")), 0o600);
        }
        let block = authorization(&first);
        assert!(block.contains(&first[0].public_key));
        assert!(block.contains("\"$JS.API.STREAM.CREATE.MNEME_EVENTS\""));
        assert_eq!(
            seed_in(&keys, "mcp"),
            Some(keys.join("api.nk")),
            "the api's mcp client is the api"
        );
    }
}
